package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/inferbid/inferbid/examples/internal/bucketgen"
)

func main() {
	out := flag.String("out", "examples/bucket", "bucket directory to (re)write")
	flag.Parse()
	if err := bucketgen.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "genbucket:", err)
		os.Exit(1)
	}
}
