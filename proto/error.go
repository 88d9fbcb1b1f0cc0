package pb

// Error lets a proto Error travel as a Go error across actors and nodes;
// errors.Is matches by code.
func (e *Error) Error() string {
	if e.GetReason() == "" {
		return e.GetCode()
	}
	return e.GetCode() + ": " + e.GetReason()
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.GetCode() == e.GetCode()
}
