package jsbridge

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// A script sees a sequence error's class in runInference's answer
// (error.sequence_error), beside its batch error type: the running sum
// served with sequences by a real sidecar.
func TestRunInferenceSequenceErrorClass(t *testing.T) {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Settings: registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{"sum/": {Stateful: true}}}, Logger: quietLogger(), SequenceCleanerInterval: -1}, sidecar.ClientOptions{Logger: quietLogger()})
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.RegisterModel(ctx, "sum/", files, ""); err != nil {
		t.Fatal(err)
	}
	p := newInferencePool(t, client, Options{})
	entry := func(id, ctl string) string {
		return `{model_path: "sum/", tensors: [{tensor_name: "x", data_type: "FLOAT", tensor_shape: [1], tensor_content: ["2"]},
			{tensor_name: "sequence_id", data_type: "INT64", tensor_shape: [1], tensor_content: ["` + id + `"]},
			{tensor_name: "sequence_control_input", data_type: "INT32", tensor_shape: [1], tensor_content: ["` + ctl + `"]}]}`
	}
	got := evalJS(t, p, `(function(){
		var s = JSON.parse(runInference({request: [`+entry("7", "1")+`]})).response;
		var r = JSON.parse(runInference({request: [`+entry("9", "0")+`, `+entry("7", "1")+`]})).response;
		return [s[0].error === undefined, r[0].error.error_type, r[0].error.sequence_error, r[1].error.error_type, r[1].error.sequence_error].join(" ");
	})()`)
	if want := `"true MODEL_NOT_FOUND NOT_FOUND MODEL_EXECUTION ALREADY_EXISTS"`; got != want {
		t.Fatalf("the script saw %s, want %s", got, want)
	}
}
