package pytorch

// The TorchScript models in testdata/ are saved by real PyTorch (Debian's
// python3-torch, through torch.jit.script/trace/save);
// `go generate ./runtimes/pytorch` (or `make models`) rewrites them.
//go:generate sh -c "cd ../.. && scripts/install-libtorch.sh --python && /usr/bin/python3 scripts/gen-pytorch-models.py"
