package revtree

import (
	"fmt"
	"testing"

	pb "github.com/settee/settee/proto"
)

// TestNewRevHash checks revisions CouchDB 3.5.2 gave these edits (the
// requests are in the comments; etf's tests and the differential test in
// httpgw cover many more bodies).
func TestNewRevHash(t *testing.T) {
	bin := &pb.AttMeta{Name: "x.bin", ContentType: "application/octet-stream", Digest: "md5-uV9n9h67A2GWIteY9F/C0w=="} // data 00 01 02
	png := &pb.AttMeta{Name: "y.png", ContentType: "image/png", Digest: "md5-C3WSarmp+f59YAgkXAk1Lg=="}                // "PNGDATA"
	r1 := &Rev{1, "23202479633c2b380f79507a776743d5"}
	cases := []struct {
		name    string
		deleted bool
		parent  *Rev
		body    string
		atts    []*pb.AttMeta
		want    string
	}{
		{name: `POST {"a":1}`, body: `{"a":1}`, want: "23202479633c2b380f79507a776743d5"},
		{name: `POST {}`, body: `{}`, want: "967a00dff5e02add41819138abb3284d"},
		{name: "empty body is {}", want: "967a00dff5e02add41819138abb3284d"},
		{name: "whitespace", body: " {\n\"a\" : 1 }\t", want: "23202479633c2b380f79507a776743d5"},
		{name: "duplicate key: the last", body: `{"a":1,"a":2}`, want: "3975759ccff3842adf690a5c10caee42"},
		{name: "duplicate key: at the last place", body: `{"a":2,"b":3,"a":1}`, want: "9cea17b5662e908b62d6a6214e34b2d0"},
		{name: "a list of bytes", body: `{"x":[1,2,3]}`, want: "52ef84511aeef60b2b567184980ae7d7"},
		{name: "1.0 is a float", body: `{"x":1.0}`, want: "547fe06a2f74b387df8e7434bb3e4068"},
		{name: "-0 is 0", body: `{"x":-0}`, want: "fae3ff05ecf46f7f24a7b298465bf776"},
		{name: "-0.0 keeps its sign", body: `{"x":-0.0}`, want: "c621b2080737bbfe7d1e980cc076b454"},
		{name: "1e2", body: `{"x":1e2}`, want: "3758505dadb2b68e4c0ad4f1284555e7"},
		{name: "big", body: `{"x":12345678901234567890}`, want: "035bd9a84d8212a068be2813e5a467a4"},
		{name: "bigger", body: `{"x":123456789012345678901234567890123456789012345678901234567890}`, want: "ee53f417297c208cafbba3ca62ee8268"},
		{name: "escapes", body: `{"x":"\u00e9\ud83d\ude00"}`, want: "f559fe5da5749a084447b2f04e515c69"},
		{name: "atoms and []", body: `{"x":null,"y":true,"z":[]}`, want: "86b4195595575dcdae8d74a8389fa88b"},
		{name: "NUL in a string", body: `{"k":"a\u0000b","\u00e9":1}`, want: "6404379e952c20634f61015eee38a1eb"},
		{name: "mixed", body: `{"x":1E2, "y":0.1}`, want: "596ad33d40adc2c95110992c6cd6938b"},
		{name: "numbers and nesting", body: `{"x":1e-400,"y":[256,1],"z":[[1],[]],"w":{"":{"a":{}}},"u":"\u0041\n\"","big":-9223372036854775808,"i":2147483648,"j":-2147483649,"k":-1,"f":0.30000000000000004}`,
			want: "bbdebcf22ced41c3574e215407f8ed4b"},
		{name: "edit", parent: r1, body: `{"a":2}`, want: "71173597778497e0a6aa176963f222db"},
		{name: "DELETE", deleted: true, parent: &Rev{2, "71173597778497e0a6aa176963f222db"}, want: "e1cb868b6bf2272171643d381ecea5e2"},
		{name: "PUT over the deletion", parent: &Rev{3, "e1cb868b6bf2272171643d381ecea5e2"}, body: `{"a":3}`, want: "7626e07f9ec7b7215df0a535b1681fdc"},
		{name: "_deleted with a body", deleted: true, parent: r1, body: `{"why":"gone"}`, want: "14870346349153af58e0323682f9d4ce"},
		{name: "an attachment", body: `{}`, atts: []*pb.AttMeta{{Name: "a.bin", ContentType: "application/octet-stream", Digest: bin.Digest}}, want: "8aade4496626f284ab230dcc89faca9a"},
		{name: "two attachments in the doc's order", body: `{}`, atts: []*pb.AttMeta{
			{Name: "b.bin", ContentType: "application/octet-stream", Digest: bin.Digest},
			{Name: "a.bin", ContentType: "image/png", Digest: bin.Digest}}, want: "f49fff1d42fa9a53189096f6d1d2bbc0"},
		{name: "body and an attachment", body: `{"v":1}`, atts: []*pb.AttMeta{bin}, want: "93c220238f080a20459f6c5a877fc19e"},
		{name: "PUT of a second attachment: the new one first", parent: &Rev{1, "93c220238f080a20459f6c5a877fc19e"}, body: `{"v":1}`,
			atts: []*pb.AttMeta{png, bin}, want: "e14a2791de3ad7f863245cc832b7dd13"},
	}
	for _, c := range cases {
		if got := NewRevHash(c.deleted, c.parent, []byte(c.body), c.atts); got != c.want {
			t.Errorf("%s: %s, CouchDB gives %s", c.name, got, c.want)
		}
	}
}

func BenchmarkNewRevHash(b *testing.B) {
	// a fabric_bench-like body: 14.7 KB of strings and numbers
	body := []byte(`{"data":"x"`)
	for i := 0; len(body) < 14700; i++ {
		body = fmt.Appendf(body, `,"s%d":"abcdefghij0123456789","n%d":%d,"l%d":[1,2,300]`, i, i, i*7919, i)
	}
	body = append(body, '}')
	p := &Rev{1, "967a00dff5e02add41819138abb3284d"}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		NewRevHash(false, p, body, nil)
	}
}
