// Command tfprotodesc writes, as a FileDescriptorSet on stdout, the
// TensorFlow framework protos that TF Serving's API protos import (and
// everything they import), taken from the pure-Go packages of
// github.com/wamuir/graft that inferbid already links. scripts/gen-proto.sh
// feeds it to protoc (--descriptor_set_in), so that only the serving
// protos (proto/tfserving) are generated and their Go code uses graft's
// types: no TensorFlow .proto source is vendored. Each file's go_package
// is set to the Go package that registered it (for a file of no types,
// graft's path for TensorFlow's go_package).
package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "github.com/wamuir/graft/tensorflow/core/example/example_protos_go_proto"
	_ "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	_ "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// roots are the imports of proto/tfserving outside tensorflow_serving/.
var roots = []string{
	"tensorflow/core/example/example.proto",
	"tensorflow/core/framework/tensor.proto",
	"tensorflow/core/protobuf/error_codes.proto",
	"tensorflow/core/protobuf/meta_graph.proto",
	"google/protobuf/any.proto",
	"google/protobuf/wrappers.proto",
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tfprotodesc:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(path string) error
	add = func(path string) error {
		if seen[path] {
			return nil
		}
		seen[path] = true
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			return fmt.Errorf("%s: %w (is its Go package imported here?)", path, err)
		}
		imports := fd.Imports()
		for i := range imports.Len() {
			if err := add(imports.Get(i).Path()); err != nil {
				return err
			}
		}
		fdp := protodesc.ToFileDescriptorProto(fd)
		pkg := goPackage(fd)
		if pkg == "" {
			// A file of no types (error_codes.proto only re-exports
			// tsl's): graft keeps TensorFlow's layout under its own path.
			if old, ok := strings.CutPrefix(fdp.GetOptions().GetGoPackage(), "github.com/tensorflow/tensorflow/tensorflow/go/"); ok {
				pkg = "github.com/wamuir/graft/tensorflow/" + old
			}
		}
		if pkg != "" {
			if fdp.Options == nil {
				fdp.Options = &descriptorpb.FileOptions{}
			}
			fdp.Options.GoPackage = proto.String(pkg)
		}
		set.File = append(set.File, fdp) // dependencies first, as protoc wants
		return nil
	}
	for _, r := range roots {
		if err := add(r); err != nil {
			return err
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// goPackage is the import path of the Go package that registered fd: that
// of its first message's or enum's Go type ("" for a file of neither).
func goPackage(fd protoreflect.FileDescriptor) string {
	if fd.Messages().Len() > 0 {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Messages().Get(0).FullName())
		if err == nil {
			return reflect.TypeOf(mt.Zero().Interface()).Elem().PkgPath()
		}
	}
	if fd.Enums().Len() > 0 {
		et, err := protoregistry.GlobalTypes.FindEnumByName(fd.Enums().Get(0).FullName())
		if err == nil {
			return reflect.TypeOf(et.New(0)).PkgPath()
		}
	}
	return ""
}
