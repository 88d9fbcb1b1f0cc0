package docjson_test

import (
	"errors"
	"fmt"

	"github.com/settee/settee/docjson"
)

func ExampleParseDoc() {
	d, err := docjson.ParseDoc([]byte(`{
		"_id": "doc1",
		"_rev": "1-967a00dff5e02add41819138abb3284d",
		"title": "hello",
		"tags": [ "a", "b" ]
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(d.ID, d.Rev)
	fmt.Println(string(d.Body))

	_, err = docjson.ParseDoc([]byte(`{"_foo": 1}`))
	var e *docjson.Error
	if errors.As(err, &e) && errors.Is(err, docjson.ErrBadSpecialMember) {
		fmt.Println(e.CouchError, e.Reason)
	}
	// Output:
	// doc1 1-967a00dff5e02add41819138abb3284d
	// {"title":"hello","tags":["a","b"]}
	// doc_validation Bad special document member: _foo
}

func ExampleParseBulkDocs() {
	bd, err := docjson.ParseBulkDocs([]byte(`{"new_edits": false, "docs": [{"_id": "a", "_rev": "1-x"}, 5]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(bd.NewEdits, len(bd.Docs))
	for _, raw := range bd.Docs {
		_, err := docjson.ParseDoc(raw)
		fmt.Printf("%s: %v\n", raw, err)
	}
	// Output:
	// false 2
	// {"_id": "a", "_rev": "1-x"}: <nil>
	// 5: Document must be a JSON object
}
