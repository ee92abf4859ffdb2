package tensorflow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// Name is the name the backend registers under.
const Name = "tensorflow"

func init() {
	runtimes.Register(Name, func(cfg driver.Config) (driver.Backend, error) {
		// Without the AVX-512 kernels the fused rounding is computed by the
		// exact Go fallback, about 100x slower than the default kernels: a
		// sidecar that starts would answer, but miss every deadline.
		switch cfg.OutputNames {
		case "", driver.OutputNamesGraph, driver.OutputNamesSignatureKey:
		default:
			return nil, fmt.Errorf("output_names %q: want %q (the default: graph tensor names, as B&A answers) or %q", cfg.OutputNames, driver.OutputNamesGraph, driver.OutputNamesSignatureKey)
		}
		if cfg.FusedMultiplyAdd && !useGemm512 {
			return nil, errors.New("fused_multiply_add needs a CPU with AVX-512F (amd64); this one has none, and the exact fallback is about 100x slower than the default kernels: turn the setting off")
		}
		return New(cfg), nil
	})
}

// Backend loads TensorFlow SavedModels.
type Backend struct {
	cfg    driver.Config
	stores stores // of external variables (external.go)
}

// New returns a backend with the runtime config (ModelResetProbability and
// NumIntraopThreads are used).
func New(cfg driver.Config) *Backend { return &Backend{cfg: cfg} }

// Close closes the stores of external variables; models own their memory.
func (b *Backend) Close() error { return b.stores.close() }

const (
	servingKey   = "serving_default"
	initOpKey    = "__saved_model_init_op"
	checkpointAt = "variables/variables"
)

// Load parses the SavedModel in files, restores its variables by running
// the saver's restore op, and compiles the serving_default signature.
func (b *Backend) Load(ctx context.Context, files driver.Files) (driver.Model, error) {
	if b.cfg.NumIntraopThreads < 0 {
		return nil, fmt.Errorf("num_intraop_threads is %d, want >= 0 (0: all cores)", b.cfg.NumIntraopThreads)
	}
	return b.load(ctx, mapOptionsOf(b.cfg), files)
}

// load is Load (and LoadDisk) with the checkpoint mapped as mo says and
// the external variables the load's options name (ctx) served from their
// stores.
func (b *Backend) load(ctx context.Context, mo mapOptions, files driver.Files) (driver.Model, error) {
	ext, err := b.externalVarsOf(ctx)
	if err != nil {
		return nil, err
	}
	m, err := loadExternal(files, b.cfg.ModelResetProbability, mo, ext)
	if err != nil {
		return nil, err
	}
	par := m.serve.intraop()
	par.threads = b.cfg.NumIntraopThreads
	par.fma = b.cfg.FusedMultiplyAdd
	if b.cfg.OutputNames == driver.OutputNamesSignatureKey {
		// Outputs answer under their signature keys, which survive a
		// re-export (the graph name, "StatefulPartitionedCall:0", does
		// not); the signature keeps the graph name, its alias the key.
		for i, o := range m.sig.Outputs {
			if len(o.Aliases) > 0 && o.Aliases[0] != "" {
				m.outNames[i] = o.Aliases[0]
			}
		}
	}
	return m, nil
}

// SavedModel file names: TensorFlow reads saved_model.pb, or the text
// format saved_model.pbtxt when there is no saved_model.pb.
const (
	savedModelPB    = "saved_model.pb"
	savedModelPBTxt = "saved_model.pbtxt"
)

// modelRoot finds saved_model.pb or saved_model.pbtxt (at the root or in
// one folder) and returns the files relative to its folder.
func modelRoot(files driver.Files) (map[string][]byte, error) {
	best := ""
	for name := range files {
		if b := path.Base(name); (b == savedModelPB || b == savedModelPBTxt) && (best == "" || len(name) < len(best)) {
			best = name
		}
	}
	if best == "" {
		return nil, fmt.Errorf("%w: no saved_model.pb (or saved_model.pbtxt) among the model files", ErrCorruptModel)
	}
	dir := path.Dir(best)
	if dir == "." {
		return files, nil
	}
	out := map[string][]byte{}
	for name, data := range files {
		if rel, ok := strings.CutPrefix(name, dir+"/"); ok {
			out[rel] = data
		}
	}
	return out, nil
}

// readSavedModel parses saved_model.pb, or saved_model.pbtxt when the
// binary form is absent, as TensorFlow's loader does.
func readSavedModel(files map[string][]byte) (*cpb.SavedModel, error) {
	if data, ok := files[savedModelPB]; ok {
		return parseSavedModel(data)
	}
	return parseSavedModelText(files[savedModelPBTxt])
}

func parseSavedModel(data []byte) (sm *cpb.SavedModel, err error) {
	defer func() {
		if r := recover(); r != nil {
			sm, err = nil, fmt.Errorf("%w: saved_model.pb: %v", ErrCorruptModel, r)
		}
	}()
	sm = &cpb.SavedModel{}
	if err := proto.Unmarshal(data, sm); err != nil {
		return nil, fmt.Errorf("%w: saved_model.pb: %v", ErrCorruptModel, err)
	}
	return sm, nil
}

// parseSavedModelText parses the text format. Any fields (TF1 collections)
// resolve against the graft protos this package links.
func parseSavedModelText(data []byte) (sm *cpb.SavedModel, err error) {
	defer func() {
		if r := recover(); r != nil {
			sm, err = nil, fmt.Errorf("%w: saved_model.pbtxt: %v", ErrCorruptModel, r)
		}
	}()
	sm = &cpb.SavedModel{}
	if err := prototext.Unmarshal(data, sm); err != nil {
		return nil, fmt.Errorf("%w: saved_model.pbtxt: %v", ErrCorruptModel, err)
	}
	return sm, nil
}

// serveTags is the MetaGraph tag set the runtime loads, as TensorFlow
// Serving loads with tags={"serve"}. driver.Config has no tag setting, so
// it is fixed.
var serveTags = []string{"serve"}

// serveGraph picks the MetaGraph whose tag set is exactly tags, as
// TensorFlow's loader matches them (a set: order and repeats do not count).
// A MetaGraph with other tags, or more tags, is not a match even when it is
// the only one.
func serveGraph(sm *cpb.SavedModel, tags []string) (*cpb.MetaGraphDef, error) {
	want := tagSet(tags)
	var present []string
	for _, mg := range sm.MetaGraphs {
		have := tagSet(mg.GetMetaInfoDef().GetTags())
		if have == want {
			return mg, nil
		}
		present = append(present, have)
	}
	if len(present) == 0 {
		return nil, fmt.Errorf("%w: the SavedModel holds no MetaGraph (want tag set %s)", ErrNoServeGraph, want)
	}
	return nil, fmt.Errorf("%w: no MetaGraph has the tag set %s; tag sets present: %s", ErrNoServeGraph, want, strings.Join(present, ", "))
}

// tagSet formats tags as a canonical set: "{serve,tpu}".
func tagSet(tags []string) string {
	s := append([]string(nil), tags...)
	sort.Strings(s)
	s = slices.Compact(s)
	return "{" + strings.Join(s, ",") + "}"
}

func newGraphDef(mg *cpb.MetaGraphDef) (*graphDef, error) {
	g := &graphDef{lib: map[string]*fpb.FunctionDef{}, ops: map[string]*opb.OpDef{}}
	for _, od := range mg.GetMetaInfoDef().GetStrippedOpList().GetOp() {
		g.ops[od.Name] = od
	}
	for _, fn := range mg.GetGraphDef().GetLibrary().GetFunction() {
		if fn.GetSignature().GetName() == "" {
			return nil, fmt.Errorf("%w: a library function has no name", ErrBadGraph)
		}
		g.lib[fn.Signature.Name] = fn
	}
	return g, nil
}

func (g *graphDef) mainScope(nodes []*ndpb.NodeDef) (*scope, error) {
	sc := &scope{nodes: make(map[string]*ndpb.NodeDef, len(nodes)), done: map[string][]int{}, visiting: map[string]bool{}}
	for _, n := range nodes {
		if _, dup := sc.nodes[n.Name]; dup {
			return nil, fmt.Errorf("%w: two nodes are named %q", ErrBadGraph, n.Name)
		}
		sc.nodes[n.Name] = n
	}
	return sc, nil
}

// model is a loaded SavedModel.
type model struct {
	sig      driver.Signature
	serve    *program
	states   *statePool
	feeds    []int // feed slot per signature input
	defaults []int // slot of the default value per input, -1 if none
	outNames []string

	// stateful: serving assigns variables. Each call outside a sequence
	// then runs on a table of its own, copied from initial (Predict), unless
	// shared: the opt-out (ShareState) where calls run one at a time on the
	// variables' shared values and may be reset.
	stateful  bool
	shared    bool
	mu        sync.Mutex
	restore   *program
	resetProb float64
	// The variables of a stateful model and their values after load: where
	// every call and every sequence starts (sequence.go). The first
	// callVars are those serving uses at run time (keepInitialState), all
	// a call's own table needs; a sequence's table holds every variable,
	// since its restore op assigns them all.
	vars     []*variable
	initial  []*dense
	callVars int
	// maps are the model's mapped checkpoint shards (mmap.go), unmapped
	// by Close; nil when nothing is mapped.
	maps *mappings
}

func load(files driver.Files, resetProb float64) (*model, error) {
	return loadMapped(files, resetProb, mapOptions{})
}

// loadMapped is load with the checkpoint's data shards mapped as mo says
// (mmap.go).
func loadMapped(files driver.Files, resetProb float64, mo mapOptions) (*model, error) {
	return loadExternal(files, resetProb, mo, nil)
}

// loadExternal is loadMapped with the variables ext names served from
// their stores (external.go).
func loadExternal(files driver.Files, resetProb float64, mo mapOptions, ext externalVars) (_ *model, err error) {
	if mo.dir == "" && forceMapDir != "" {
		mo = mapOptions{dir: forceMapDir}
	}
	files2, err := modelRoot(files)
	if err != nil {
		return nil, err
	}
	sm, err := readSavedModel(files2)
	if err != nil {
		return nil, err
	}
	mg, err := serveGraph(sm, serveTags)
	if err != nil {
		return nil, err
	}
	g, err := newGraphDef(mg)
	if err != nil {
		return nil, err
	}
	nodes := mg.GetGraphDef().GetNode()
	assets, err := assetFeeds(mg)
	if err != nil {
		return nil, err
	}
	initOp, err := initOpName(mg)
	if err != nil {
		return nil, err
	}
	if err := validateGraph(nodes, g.lib, runRoots(mg, initOp)); err != nil {
		return nil, err
	}
	sigDef, ok := mg.SignatureDef[servingKey]
	if !ok {
		keys := make([]string, 0, len(mg.SignatureDef))
		for k := range mg.SignatureDef {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("%w (signatures: %s)", ErrNoSignature, strings.Join(keys, ", "))
	}

	var ck *checkpoint
	if idx, ok := files2[checkpointAt+".index"]; ok {
		if ck, err = parseCheckpoint(idx, checkpointAt, files2); err != nil {
			return nil, err
		}
		ck.external = ext
	}
	maps, err := ck.mapShards(mo, checkpointAt)
	if err != nil {
		return nil, fmt.Errorf("memory-mapped variables: %w", err)
	}
	defer func() {
		if ck != nil {
			ck.src = nil // the caller's bytes: not kept past the load
		}
		if err != nil {
			_ = maps.close()
		} else {
			maps.dropAll()
		}
	}()
	vars := newVarStore()
	m := &model{resetProb: resetProb, maps: maps}

	// Restore the variables the way TensorFlow does: run the saver's
	// restore op with the checkpoint prefix fed as the filename.
	// As TensorFlow does, a model without variables/variables.index skips
	// the restore (frozen models); serving must then read no variable.
	if sd := mg.GetSaverDef(); sd.GetRestoreOpName() != "" && ck != nil {
		main, err := g.mainScope(nodes)
		if err != nil {
			return nil, err
		}
		c := newCompiler(g, vars, ck)
		c.feedConst(sd.FilenameTensorName, &dense{dt: dtString, shape: []int64{}, s: []string{checkpointAt}})
		c.files = files2
		feedAssets(c, assets)
		restoreOp, _, _ := splitTensorName(strings.TrimPrefix(sd.RestoreOpName, "^"))
		if err := c.target(main, restoreOp); err != nil {
			return nil, fmt.Errorf("saver restore op: %w", err)
		}
		m.restore = c.prog
		if err := m.restore.run(m.restore.newState()); err != nil {
			return nil, fmt.Errorf("restoring variables: %w", err)
		}
	}
	// The init op runs after the restore, with every asset's path fed.
	if initOp != "" {
		name, _, _ := splitTensorName(strings.TrimPrefix(initOp, "^"))
		main, err := g.mainScope(nodes)
		if err != nil {
			return nil, err
		}
		if nd, ok := main.nodes[name]; !ok || nd.Op != "NoOp" || len(nd.Input) != 0 {
			c := newCompiler(g, vars, ck)
			c.skipRestoredInits = true
			c.files = files2
			feedAssets(c, assets)
			if err := c.target(main, name); err != nil {
				return nil, fmt.Errorf("init op: %w", err)
			}
			if err := c.prog.run(c.prog.newState()); err != nil {
				return nil, fmt.Errorf("init op: %w", err)
			}
		}
	}
	if err := ext.checkRestored(); err != nil {
		return nil, err
	}
	if err := m.compileServing(g, nodes, sigDef, vars, ck); err != nil {
		return nil, err
	}
	if m.stateful {
		m.keepInitialState(vars, runtimeVars(m.serve))
	}
	if !m.stateful {
		// Only a stateful model can need its checkpoint again (a sequence
		// start); dropping the restore program frees the checkpoint bytes.
		m.restore = nil
		releaseUnreadVariables(m.serve, vars)
	}
	return m, nil
}

// feedAssets binds each asset tensor to its path, as TensorFlow's loader
// feeds them to the restore and init ops.
func feedAssets(c *compiler, assets map[string]string) {
	for _, name := range sortedKeys(assets) {
		c.feedConst(name, &dense{dt: dtString, shape: []int64{}, s: []string{assets[name]}})
	}
}

// runRoots lists what the loader and serving run: the serving signature's
// outputs, the saver's restore op and the init op. Only what they reach
// can ever run.
func runRoots(mg *cpb.MetaGraphDef, initOp string) []string {
	var roots []string
	sd := mg.SignatureDef[servingKey]
	for _, k := range sortedKeys(sd.GetOutputs()) {
		roots = append(roots, sd.Outputs[k].GetName())
	}
	if op := mg.GetSaverDef().GetRestoreOpName(); op != "" {
		roots = append(roots, op)
	}
	if initOp != "" {
		roots = append(roots, initOp)
	}
	return roots
}

// releaseUnreadVariables drops the value of every variable that no step of
// p reads or writes at run time. Folding made such values constants of p,
// which keep what they need; where the fusion pass replaced a constant by
// its kernel's packed copy, the variable held the model's second copy of
// those weights (a loaded model took 2x its file size).
func releaseUnreadVariables(p *program, vars *varStore) {
	used := runtimeVars(p)
	for _, v := range vars.vars {
		if !used[v] {
			v.value = nil
		}
	}
}

// runtimeVars returns the variables that steps of p (and of the programs
// its If and While steps run) read or write at run time: the ones folding
// left.
func runtimeVars(p *program) map[*variable]bool {
	used := map[*variable]bool{}
	var walk func(p *program)
	walk = func(p *program) {
		for _, st := range p.steps {
			if st.usesVar != nil {
				used[st.usesVar] = true
			}
			for _, sub := range st.subs {
				walk(sub)
			}
		}
	}
	walk(p)
	return used
}

// assetFeeds maps each asset's tensor (asset_file_def's tensor_info name)
// to the path TensorFlow's loader feeds it with: "assets/<filename>", here
// relative to the model's root, since the model's files live in memory
// (ReadFile resolves such paths against them). As in TensorFlow, an asset
// whose file is missing fails only when an op reads it; a file name that is
// not a clean relative name fails the load.
func assetFeeds(mg *cpb.MetaGraphDef) (map[string]string, error) {
	assets, err := assetFileDefs(mg)
	if err != nil {
		return nil, err
	}
	feeds := map[string]string{}
	for _, a := range assets {
		name := a.GetFilename()
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || strings.HasPrefix(name, "../") || name == ".." {
			return nil, fmt.Errorf("%w: asset_file_def names the asset %q (tensor %s): not a clean relative file name",
				ErrCorruptModel, name, a.GetTensorInfo().GetName())
		}
		tensorName := a.GetTensorInfo().GetName()
		if tensorName == "" {
			return nil, fmt.Errorf("%w: asset %q has no tensor name to feed its path to", ErrCorruptModel, name)
		}
		feeds[tensorName] = assetsDir + name
	}
	return feeds, nil
}

const assetsDir = "assets/"

// initOpName finds the init op as TensorFlow's loader does: the output of
// the __saved_model_init_op signature (TF2), else the single node of the
// saved_model_main_op collection, else of legacy_init_op (TF1); "" if none.
func initOpName(mg *cpb.MetaGraphDef) (string, error) {
	if sig, ok := mg.SignatureDef[initOpKey]; ok {
		out, ok := sig.GetOutputs()[initOpKey]
		if !ok {
			return "", fmt.Errorf("%w: signature %s has no output %s", ErrBadGraph, initOpKey, initOpKey)
		}
		return out.GetName(), nil
	}
	key := "legacy_init_op"
	if _, ok := mg.GetCollectionDef()["saved_model_main_op"]; ok {
		key = "saved_model_main_op"
	}
	col, ok := mg.GetCollectionDef()[key]
	if !ok {
		return "", nil
	}
	if n := len(col.GetNodeList().GetValue()); n != 1 {
		return "", fmt.Errorf("%w: collection %s lists %d nodes, want exactly one init op", ErrBadGraph, key, n)
	}
	return col.GetNodeList().GetValue()[0], nil
}

// assetFileDefs returns the MetaGraph's assets as TensorFlow's loader finds
// them: asset_file_def, or else (TF1 exports) the AssetFileDefs packed as
// Any in the "saved_model_assets" collection.
func assetFileDefs(mg *cpb.MetaGraphDef) ([]*cpb.AssetFileDef, error) {
	if defs := mg.GetAssetFileDef(); len(defs) > 0 {
		return defs, nil
	}
	var defs []*cpb.AssetFileDef
	for i, a := range mg.GetCollectionDef()["saved_model_assets"].GetAnyList().GetValue() {
		d := &cpb.AssetFileDef{}
		if err := a.UnmarshalTo(d); err != nil {
			return nil, fmt.Errorf("%w: saved_model_assets collection, item %d: %v", ErrCorruptModel, i, err)
		}
		defs = append(defs, d)
	}
	return defs, nil
}

func (m *model) compileServing(g *graphDef, nodes []*ndpb.NodeDef, sd *cpb.SignatureDef, vars *varStore, ck *checkpoint) error {
	main, err := g.mainScope(nodes)
	if err != nil {
		return err
	}
	c := newCompiler(g, vars, ck)
	inKeys := sortedKeys(sd.Inputs)
	for _, key := range inKeys {
		ti := sd.Inputs[key]
		dt := fromDType(ti.Dtype)
		if dt == tensor.Invalid {
			return fmt.Errorf("%w: serving_default input %q (%s) has dtype %s; inputs must be DOUBLE, FLOAT, INT8-64, UINT8-64, BOOL, HALF or STRING", ErrBadGraph, key, ti.GetName(), dtypeName(ti.Dtype))
		}
		name := ti.GetName()
		if name == "" {
			return fmt.Errorf("%w: serving_default input %q has no tensor name (composite tensors are not supported)", ErrBadGraph, key)
		}
		nodeName, idx, err := splitTensorName(name)
		if err != nil {
			return err
		}
		if _, ok := main.nodes[nodeName]; !ok {
			return fmt.Errorf("%w: serving_default input %q names tensor %q, which is not in the graph", ErrBadGraph, key, name)
		}
		def := -1
		if nd := main.nodes[nodeName]; nd.Op == "PlaceholderWithDefault" && idx == 0 && len(nd.Input) == 1 {
			if s, err := c.ref(main, nd.Input[0]); err == nil {
				def = s
			}
		}
		m.feeds = append(m.feeds, c.feed(name, baseType(ti.Dtype)))
		m.defaults = append(m.defaults, def)
		m.sig.Inputs = append(m.sig.Inputs, driver.TensorSpec{Name: name, Aliases: []string{key}, DType: dt, Shape: specShape(ti.TensorShape)})
	}
	for _, key := range sortedKeys(sd.Outputs) {
		ti := sd.Outputs[key]
		if ti.GetName() == "" {
			return fmt.Errorf("%w: serving_default output %q has no tensor name", ErrBadGraph, key)
		}
		if fromDType(ti.Dtype) == tensor.Invalid {
			return fmt.Errorf("%w: serving_default output %q has dtype %s, which cannot be returned", ErrBadGraph, key, dtypeName(ti.Dtype))
		}
		if err := c.fetch(main, ti.GetName()); err != nil {
			if isMissingOp(err) {
				continue // reported below with every other missing op
			}
			return fmt.Errorf("serving_default output %q (%s): %w", key, ti.GetName(), err)
		}
		m.outNames = append(m.outNames, ti.GetName())
		m.sig.Outputs = append(m.sig.Outputs, driver.TensorSpec{Name: ti.GetName(), Aliases: []string{key}, DType: fromDType(ti.Dtype), Shape: specShape(ti.TensorShape)})
	}
	if err := c.missing.err(); err != nil {
		return err
	}
	if ck != nil && len(ck.external) > 0 {
		if err := externalGathers(c.prog); err != nil {
			return err
		}
	}
	if err := c.prog.finish(); err != nil {
		return err
	}
	for i, d := range m.defaults {
		if d >= 0 && c.prog.consts[d] != nil && c.prog.consts[d].dt == c.prog.types[m.feeds[i]] {
			m.sig.Inputs[i].Optional = true
		} else {
			m.defaults[i] = -1
		}
	}
	written := map[*variable]bool{}
	for _, st := range c.prog.steps {
		if st.writes != nil {
			written[st.writes] = true
		}
	}
	for _, st := range c.prog.steps {
		if v := st.readVar; v != nil && v.value == nil && !written[v] {
			what := "the restore op did not assign it"
			if ck == nil {
				what = "the model has no checkpoint (variables/variables.index)"
			}
			return &OpError{Op: st.op, Node: st.node, Err: fmt.Errorf("%w: serving reads variable %s, but %s", ErrCorruptCheckpoint, v.name, what)}
		}
	}
	m.serve = c.prog
	m.stateful = c.prog.stateful
	m.states = newStatePool(c.prog)
	return nil
}

func sortedKeys[V any](mp map[string]V) []string {
	keys := make([]string, 0, len(mp))
	for k := range mp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (m *model) Signature() driver.Signature { return m.sig }

var (
	_ driver.StatefulModel    = (*model)(nil)
	_ driver.SharedStateModel = (*model)(nil)
)

// Stateful reports whether serving assigns variables. Such a model's calls
// are never merged (rows of a batch would meet through the variables).
func (m *model) Stateful() bool { return m.stateful }

// ShareState makes the model's calls outside sequences share one set of
// variable values, as B&A's sidecar does: they then run one at a time and
// ModelResetProbability applies. Load's caller calls it before any call.
func (m *model) ShareState() error {
	if !m.stateful {
		return errors.New("the model assigns no variables: it has no state to share")
	}
	m.shared = true
	return nil
}

// Predict runs serving_default. runtimes has checked inputs against the
// signature, which declares every feed's exact dtype and marks optional
// only the inputs with a usable default: nothing is checked again here.
//
// A model that assigns variables runs each call on a table of its own,
// holding the values the model had after load, so the call answers as a
// freshly loaded model would and what it assigns dies with it: no state
// crosses requests. Such calls take no lock. A model that assigns nothing
// has no table (the branch is its only cost).
func (m *model) Predict(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	if !m.stateful {
		return m.serveOnce(ctx, inputs)
	}
	if !m.shared {
		return m.serveOnce(m.loadTimeEnv(ctx), inputs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resetProb > 0 && rand.Float64() < m.resetProb {
		m.reset()
	}
	return m.serveOnce(ctx, inputs)
}

// loadTimeEnv returns ctx carrying a new variable table holding the
// values the variables serving uses at run time had after load. Copying
// pointers is enough: values are replaced, never written in place
// (variables.go), so the call's assignments land in its table only.
func (m *model) loadTimeEnv(ctx context.Context) context.Context {
	c := &callCtx{Context: ctx}
	if m.callVars <= len(c.inline) {
		c.env.vals = c.inline[:m.callVars]
		copy(c.env.vals, m.initial)
	} else {
		c.env.vals = slices.Clone(m.initial[:m.callVars])
	}
	return c
}

// callCtx is a call's context carrying its own variable table, in one
// allocation with the table's first entries (context.WithValue and the
// table would take three).
type callCtx struct {
	context.Context
	env    varEnv
	inline [4]*dense
}

func (c *callCtx) Value(key any) any {
	if _, ok := key.(varEnvKey); ok {
		return &c.env
	}
	return c.Context.Value(key)
}

// serveOnce runs serving_default once (a shared-state model's caller holds
// mu).
func (m *model) serveOnce(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	s := m.states.get()
	defer m.states.put(s)
	for i, in := range inputs {
		slot := m.feeds[i]
		if in.Data == nil { // an absent optional input
			s.vals[slot] = s.vals[m.defaults[i]]
			continue
		}
		viewInput(&s.owned[slot], in)
		s.vals[slot] = &s.owned[slot]
	}
	s.ctx = ctx // a While stops when the call's deadline passes
	err := m.serve.run(s)
	s.ctx = nil
	var out []tensor.Tensor
	if err == nil {
		out = make([]tensor.Tensor, len(m.serve.fetches))
		for i, slot := range m.serve.fetches {
			if s.vals[slot] == deadTensor {
				// TensorFlow returns no value for it.
				err = fmt.Errorf("output %q is dead: the TF1 Switch (tf.cond) it depends on took the other branch and no Merge joins them", m.outNames[i])
				break
			}
			if out[i], err = exportTensor(m.outNames[i], s.vals[slot]); err != nil {
				break
			}
		}
	}
	// Drop references to the caller's input data before pooling the state.
	for _, slot := range m.feeds {
		s.owned[slot] = dense{}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reset gives every variable back the shared value it had after load (the
// checkpoint's, or the init op's): the state of a freshly loaded model.
// The caller holds mu.
func (m *model) reset() {
	for i, v := range m.vars {
		v.value = m.initial[i]
	}
}

// Close unmaps the model's mapped checkpoint shards, if any: every call
// has returned (driver.Model's contract) and outputs are copies, so
// nothing reads them any more.
func (m *model) Close() error { return m.maps.close() }
