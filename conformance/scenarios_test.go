package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The scenario definitions (testdata/scenarios/<area>.json) are the recorder's
// input: the requests of every step, and which response values vary. The
// corpus (testdata/<area>.jsonl) is what the recorder made of them.

// scenarioDef is one scenario of a scenarios file.
type scenarioDef struct {
	Scenario string    `json:"scenario"`
	Setup    []string  `json:"setup,omitempty"`
	Steps    []stepDef `json:"steps"`
}

// stepDef is one step: the request exactly as a record has it, the response
// pointers that vary (pointer -> kind, in the order given), and a note.
type stepDef struct {
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request"`
	Vary    varyList        `json:"vary,omitempty"`
	Note    string          `json:"note,omitempty"`
}

// vary is one "pointer": "kind" entry of a step's vary object.
type vary struct{ ptr, kind string }

type varyList []vary

// UnmarshalJSON keeps the order of the object's members: the literal ones go
// into the record's normalise list in that order.
func (vl *varyList) UnmarshalJSON(data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return err
	}
	o, ok := v.(*object)
	if !ok {
		return fmt.Errorf("vary must be an object of pointer: kind")
	}
	if len(o.dups) > 0 {
		return fmt.Errorf("vary: pointer %s listed twice", o.dups[0])
	}
	for _, k := range o.keys {
		kind, ok := o.vals[k].(string)
		if !ok {
			return fmt.Errorf("vary %s: the kind must be a string", k)
		}
		*vl = append(*vl, vary{ptr: k, kind: kind})
	}
	return nil
}

// varyKinds are the kinds a vary entry may name: what the recorder puts in
// place of the recorded value (testdata/README.md, "Scenario definitions").
var varyKinds = map[string]string{
	"rev":      "each N-<32 hex> in the string becomes N-<rev:K>; a bare 32-hex string <rev:K>",
	"uuid":     "each 32-hex run in the string becomes <uuid:K>",
	"seq":      "the value (string or integer) becomes <seq:K>",
	"time":     "the string becomes <time>",
	"size":     "the number becomes <size>",
	"etag":     "the header becomes <etag>",
	"hash":     "the hex string becomes <hash>",
	"salt":     "the hex string becomes <salt>",
	"ref":      "the value becomes <ref>",
	"boundary": "the boundary parameter (or the whole string) becomes <boundary>",
	"cookie":   "Set-Cookie: the AuthSession value becomes <session>, Expires <time>",
	"feed":     "a text body: seq/last_seq members and id: lines become <seq:K>, rev members N-<rev:K>",
	"literal":  "kept as recorded, listed in normalise (varies between servers)",
}

// scenarioFile is one testdata/scenarios/<area>.json.
type scenarioFile struct {
	area      string
	path      string
	scenarios []*scenarioDef
}

// loadScenarioFiles reads every scenarios/*.json of dir, in name order, and
// checks each step's request the way loadCorpus checks a record.
func loadScenarioFiles(dir string) ([]*scenarioFile, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no scenario definitions (*.json) in %s", dir)
	}
	sort.Strings(files)
	var out []*scenarioFile
	names := map[string]string{}
	scNames := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sf := &scenarioFile{area: strings.TrimSuffix(filepath.Base(f), ".json"), path: f}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sf.scenarios); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		for _, sd := range sf.scenarios {
			where := fmt.Sprintf("%s: scenario %q", filepath.Base(f), sd.Scenario)
			if sd.Scenario == "" || len(sd.Steps) == 0 {
				return nil, fmt.Errorf("%s: a scenario needs a name and steps", where)
			}
			if prev, dup := scNames[sd.Scenario]; dup {
				return nil, fmt.Errorf("%s: scenario already defined in %s", where, prev)
			}
			scNames[sd.Scenario] = filepath.Base(f)
			for _, s := range sd.Setup {
				if !setupRequests[s] {
					return nil, fmt.Errorf("%s: unknown setup request %q", where, s)
				}
			}
			for i := range sd.Steps {
				st := &sd.Steps[i]
				if prev, dup := names[st.Name]; dup {
					return nil, fmt.Errorf("%s: step name %q already used in %s", where, st.Name, prev)
				}
				names[st.Name] = filepath.Base(f)
				if _, err := st.record(sf.area, sd, i+1); err != nil {
					return nil, fmt.Errorf("%s, step %d (%s): %v", where, i+1, st.Name, err)
				}
				for _, v := range st.Vary {
					if _, ok := varyKinds[v.kind]; !ok {
						return nil, fmt.Errorf("%s, %s: vary %s: unknown kind %q", where, st.Name, v.ptr, v.kind)
					}
					if !strings.HasPrefix(v.ptr, "/response/headers/") && !strings.HasPrefix(v.ptr, "/response/body") {
						return nil, fmt.Errorf("%s, %s: vary pointer %q is not in /response/headers or /response/body", where, st.Name, v.ptr)
					}
				}
			}
		}
		out = append(out, sf)
	}
	return out, nil
}

// record is the step as a corpus record without its response: what the
// harness needs to build the request.
func (st *stepDef) record(area string, sd *scenarioDef, step int) (*record, error) {
	r := &record{Area: area, Scenario: sd.Scenario, Name: st.Name, Step: step, Note: st.Note, where: st.Name}
	if step == 1 {
		r.Setup = sd.Setup
	}
	dec := json.NewDecoder(bytes.NewReader(st.Request))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.Request); err != nil {
		return nil, fmt.Errorf("request: %v", err)
	}
	r.Response.Status = 1 // not recorded yet; prepare wants one
	if err := r.prepare(); err != nil {
		return nil, err
	}
	r.Response.Status = 0
	return r, nil
}

// scenario builds the harness's view of a scenario definition.
func (sd *scenarioDef) scenario(area string) (*scenario, error) {
	sc := &scenario{name: sd.Scenario}
	for i := range sd.Steps {
		r, err := sd.Steps[i].record(area, sd, i+1)
		if err != nil {
			return nil, err
		}
		sc.records = append(sc.records, r)
	}
	return sc, nil
}
