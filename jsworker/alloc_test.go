package jsworker

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	pb "github.com/inferbid/inferbid/proto/jsworkerpb"
)

// BenchmarkServeChunk is one chunk of one interest group through Serve in
// this process, over a socketpair, as a host sends it: what host and
// worker allocate per chunk (-benchmem), the JS runtime's own included.
func BenchmarkServeChunk(b *testing.B) {
	const src = `function generateBid(ig) { return {ig: ig.name, bid: ig.name.length}; }`
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	hostConn, workerConn := conn(fds[0]), conn(fds[1])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, workerConn, ServeOptions{Logger: slog.New(slog.DiscardHandler)}) }()
	p := newPeer(hostConn, 1)
	go p.readLoop()
	defer func() { p.close(); <-served }()
	var ack pb.ConfigAck
	if err := p.call(ctx, &pb.Config{Modules: []*pb.Module{{Name: "bench.js", Source: src}}}, &ack); err != nil || ack.GetError() != "" {
		b.Fatal(err, ack.GetError())
	}
	req := &pb.BidsRequest{InterestGroups: [][]byte{[]byte(`{"name":"shoes"}`)}, SliceMicros: DefaultSlice.Microseconds()}
	b.ReportAllocs()
	for b.Loop() {
		var resp pb.BidsResponse
		if err := p.call(ctx, req, &resp); err != nil {
			b.Fatal(err)
		}
		if len(resp.GetResults()) != 1 || resp.GetResults()[0].GetErrorKind() != pb.ErrorKind_ERROR_KIND_NONE {
			b.Fatalf("%v", resp.GetResults())
		}
	}
}
