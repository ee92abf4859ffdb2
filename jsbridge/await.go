package jsbridge

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/dop251/goja"
)

// ErrUnsettled: the function returned a promise (or a thenable) that was
// still pending once the call and every job it queued had run. Nothing can
// settle it later (the sandbox has no timers and no I/O), so the call
// fails with an error wrapping ErrUnsettled, e.g. "jsbridge: generateBid
// returned a promise that never settled: ...".
var ErrUnsettled = errors.New("returned a promise that never settled")

var promiseType = reflect.TypeFor[*goja.Promise]()

// await settles what fn returned, as an await would: a value that is not a
// promise or a thenable is the result itself; a promise's fulfilment value
// is the result, and a rejection is a *ScriptError ("Uncaught (in promise)
// ..."), as a thrown exception is. goja runs its job queue each time a
// call from Go returns, so a promise that can settle has settled by the
// time the result is read: a pending one never will (ErrUnsettled).
//
// A goja Promise is read by its state (as await does for a native promise,
// without calling its then). Another object with a callable then is a
// thenable: then is called once with resolving functions, and the job
// queue runs after it. An interrupt or a stack overflow in any of it is
// returned as goja's error, for translate.
func (v *vm) await(fn string, res goja.Value) (goja.Value, error) {
	obj, ok := res.(*goja.Object)
	if !ok {
		return res, nil
	}
	var p *goja.Promise
	if obj.ExportType() == promiseType {
		p, _ = obj.Export().(*goja.Promise)
	}
	if p == nil {
		then, err := v.get(obj, "then")
		if err != nil {
			return nil, v.rejection(fn, err)
		}
		thenFn, ok := goja.AssertFunction(then)
		if !ok {
			return res, nil
		}
		var resolve, reject func(any) error
		p, resolve, reject = v.rt.NewPromise()
		_, err = thenFn(obj, v.rt.ToValue(settleFunc(resolve)), v.rt.ToValue(settleFunc(reject)))
		if err != nil {
			// A throw from then rejects, unless then settled it first.
			ex, isEx := errors.AsType[*goja.Exception](err)
			if !isEx {
				return nil, err
			}
			if err := reject(ex.Value()); err != nil {
				return nil, err
			}
		}
	}
	switch p.State() {
	case goja.PromiseStateFulfilled:
		return p.Result(), nil
	case goja.PromiseStateRejected:
		return nil, &ScriptError{Func: fn, Message: "Uncaught (in promise) " + v.describe(p.Result())}
	}
	return nil, fmt.Errorf("jsbridge: %s %w: it was still pending once the call and its jobs had run, and nothing else can settle it (there are no timers or I/O)", fn, ErrUnsettled)
}

// settleFunc is a JS function calling one of goja's Go resolving functions.
func settleFunc(settle func(any) error) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		if err := settle(call.Argument(0)); err != nil {
			panic(err) // an interrupt: it ends the call
		}
		return goja.Undefined()
	}
}

// rejection is the error of a call whose result threw while being awaited:
// a *ScriptError for a JS exception, else err itself.
func (v *vm) rejection(fn string, err error) error {
	if ex, ok := errors.AsType[*goja.Exception](err); ok {
		return &ScriptError{Func: fn, Message: "Uncaught (in promise) " + v.describe(ex.Value())}
	}
	return err
}

// describe is a rejection reason as text: an error's stack (its message
// and where it was made), else the value as a string; "[object]" when
// that throws.
func (v *vm) describe(reason goja.Value) string {
	obj, ok := reason.(*goja.Object)
	if !ok {
		return reason.String()
	}
	s, err := v.hostCall(func() goja.Value {
		if st := obj.Get("stack"); st != nil {
			if _, isStr := st.Export().(string); isStr {
				return st
			}
		}
		return obj.ToString()
	})
	if err != nil {
		return "[object]"
	}
	return strings.TrimRight(s.String(), "\n")
}

// get is obj[name] read from Go. It runs no JS unless the property is a
// getter or obj a Proxy, which is rare, so it is read directly rather than
// through hostCall: a JS exception is returned, and an interrupt or a stack
// overflow, which goja panics with out of a read from Go, is returned and
// breaks the runtime (goja's own clean-up after them, of its job queue,
// did not run).
func (v *vm) get(obj *goja.Object, name string) (val goja.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *goja.InterruptedError:
				err = e
			case *goja.StackOverflowError:
				err = e
			default:
				panic(r)
			}
			v.broken = true
		}
	}()
	if ex := v.rt.Try(func() { val = obj.Get(name) }); ex != nil {
		return nil, ex
	}
	return val, nil
}

// hostCall runs f as goja runs a host function called from Go: a JS
// exception comes back as a *goja.Exception, an interrupt or a stack
// overflow as goja's error (calling goja's API directly from Go would
// panic with them), and the job queue runs after it. The function is made
// once per runtime, on first use.
func (v *vm) hostCall(f func() goja.Value) (goja.Value, error) {
	if v.host == nil {
		v.host, _ = goja.AssertFunction(v.rt.ToValue(func(goja.FunctionCall) goja.Value {
			body := v.hostBody
			v.hostBody = nil
			if r := body(); r != nil {
				return r
			}
			return goja.Undefined() // Object.Get's nil: no such property
		}))
	}
	v.hostBody = f
	return v.host(goja.Undefined())
}
