package jsondoc_test

import (
	"errors"
	"fmt"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

func ExampleDoc_Apply() {
	d, err := jsondoc.Parse([]byte(`{"count":1,"items":["a"]}`))
	if err != nil {
		panic(err)
	}
	ok := []codec.PatchOp{
		{Op: codec.OpReplace, Path: "/count", Value: codec.Raw(`2`)},
		{Op: codec.OpAdd, Path: "/items/-", Value: codec.Raw(`"b"`)},
	}
	fmt.Println(d.Apply(ok), string(d.AppendJSON(nil)))

	// The second op fails, so the first is undone too.
	failing := []codec.PatchOp{
		{Op: codec.OpReplace, Path: "/count", Value: codec.Raw(`99`)},
		{Op: codec.OpRemove, Path: "/missing"},
	}
	err = d.Apply(failing)
	var pe *jsondoc.PatchError
	fmt.Println(errors.As(err, &pe), pe.Index, errors.Is(err, jsondoc.ErrNotFound))
	fmt.Println(string(d.AppendJSON(nil)))
	// Output:
	// <nil> {"count":2,"items":["a","b"]}
	// true 1 true
	// {"count":2,"items":["a","b"]}
}

func ExampleDoc_MergeShallow() {
	var meta jsondoc.Doc // the zero Doc is null; merging makes it an object
	_ = meta.MergeShallow([]byte(`{"a":{"x":1},"b":2}`))
	_ = meta.MergeShallow([]byte(`{"a":{"y":2},"c":null}`))
	fmt.Println(string(meta.AppendJSON(nil)))
	// Output: {"a":{"y":2},"b":2,"c":null}
}

func ExampleEqual() {
	eq, _ := jsondoc.Equal([]byte(`{"a":1,"b":[1.0,"\u0041"]}`), []byte(`{"b":[1e0,"A"],"a":10e-1}`))
	fmt.Println(eq)
	// Output: true
}
