# inferbid — build, test and benchmark. Every target installs what it needs
# (Debian packages, the ONNX Runtime library from npm, Go tools), so each
# works on a fresh machine.

SHELL := /bin/bash
GO ?= go
BIN := bin
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)

# Pure-Go binaries (CGO_ENABLED=0) and the ones that need native libraries.
PURE_CMDS := bidding-server inferctl inference-sidecar-tensorflow
.PHONY: all build deps deps-onnx deps-pytorch test test-go test-pytorch bench lint proto proto-check demo clean

all: build

deps-onnx:
	scripts/install-onnxruntime.sh

deps-pytorch:
	scripts/install-libtorch.sh

deps: deps-onnx

build: deps
	@mkdir -p $(BIN)
	for c in $(PURE_CMDS); do CGO_ENABLED=0 $(GO) build -o $(BIN)/$$c ./cmd/$$c || exit 1; done
	$(GO) build -o $(BIN)/inference-sidecar-onnx ./cmd/inference-sidecar-onnx

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

proto:
	scripts/gen-proto.sh

proto-check:
	scripts/check-proto.sh

test: deps lint proto-check
	INFERBID_REQUIRE_NATIVE=1 $(GO) test -race -count=1 ./...

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

demo: build
	scripts/demo.sh

clean:
	rm -rf $(BIN)
