// Command mkimage writes inferbid's OCI images (package ociimage) from
// binaries already built: `make image` builds them and runs it.
//
//	mkimage --bin DIR [--onnxruntime LIB] [--pytorch] --out DIR [--tag T] [--epoch SECONDS]
//
// --epoch defaults to $SOURCE_DATE_EPOCH, else 0.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/inferbid/inferbid/deploy/ociimage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var o ociimage.Options
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.StringVar(&o.BinDir, "bin", "", "directory of the built binaries (required)")
	fs.StringVar(&o.ONNXRuntimeLib, "onnxruntime", "", "libonnxruntime.so.1; default none: only the pure-Go image")
	fs.BoolVar(&o.PyTorch, "pytorch", false, "also build inferbid-pytorch from DIR/"+ociimage.PyTorchSidecar+" and libtorch's libraries (about 490 MB)")
	fs.StringVar(&o.OutDir, "out", "", "output directory: layout/ and one tarball per image (required)")
	fs.StringVar(&o.Repository, "repository", "", "image name prefix; default inferbid")
	fs.StringVar(&o.Tag, "tag", "", "image tag; default devel")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "file and config time in Unix seconds (default $SOURCE_DATE_EPOCH; empty = 0)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *epoch != "" {
		sec, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("--epoch %q: want Unix seconds: %w", *epoch, err)
		}
		o.Epoch = time.Unix(sec, 0)
	}
	images, err := ociimage.Build(o)
	if err != nil {
		return err
	}
	for _, img := range images {
		fmt.Printf("%s %s %.1f MB (compressed) %s\n", img.Ref, img.Digest, float64(img.Size)/1e6, img.Tarball)
	}
	return nil
}
