package auth

import (
	"slices"
	"testing"
)

func TestParseHandlers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil: an error
	}{
		{DefaultHandlers, []string{"cookie", "default"}},
		{"{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}", []string{"jwt", "cookie", "default"}},
		{"{chttpd_auth,proxy_authentication_handler},{couch_httpd_auth, default_authentication_handler}", []string{"proxy", "default"}},
		{"  {chttpd_auth, default_authentication_handler}  ", []string{"default"}},
		{"", []string{}},
		{"{chttpd_auth, magic_authentication_handler}", nil},
		{"{my_mod, default_authentication_handler}", nil},
		{"{chttpd_auth, default}", nil},
		{"{chttpd_auth, default_authentication_handler},", nil},
		{"cookie, default", nil},
		{"{chttpd_auth, default_authentication_handler} x", nil},
	} {
		got, err := ParseHandlers(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("ParseHandlers(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("ParseHandlers(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
