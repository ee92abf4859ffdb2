package main

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The set holds every import of TF Serving's protos after its own
// imports, each file's go_package naming graft's Go package that
// registered it (error_codes.proto, which has no types, by graft's
// layout).
func TestDescriptorSet(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(out.Bytes(), &set); err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for i, f := range set.GetFile() {
		for _, dep := range f.GetDependency() {
			if _, ok := at[dep]; !ok {
				t.Errorf("%s comes before its import %s", f.GetName(), dep)
			}
		}
		at[f.GetName()] = i
		if pkg := f.GetOptions().GetGoPackage(); strings.HasPrefix(f.GetName(), "tensorflow/") && !strings.HasPrefix(pkg, "github.com/wamuir/graft/tensorflow/") {
			t.Errorf("%s: go_package %q is not graft's", f.GetName(), pkg)
		}
	}
	for _, r := range roots {
		if _, ok := at[r]; !ok {
			t.Errorf("the set lacks %s", r)
		}
	}
	want := map[string]string{
		"tensorflow/core/framework/tensor.proto":     "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto",
		"tensorflow/core/protobuf/error_codes.proto": "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto",
	}
	for name, pkg := range want {
		if got := set.GetFile()[at[name]].GetOptions().GetGoPackage(); got != pkg {
			t.Errorf("%s: go_package %q, want %q", name, got, pkg)
		}
	}
}
