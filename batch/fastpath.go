package batch

import (
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/tensor"
)

// The fast path walks the validated document once, in place, parsing each
// tensor_content array where it stands. gjson's ForEach hands out every
// child's raw text, which costs a scan of that child at every level: five
// scans of the numbers before the numbers are read. The fast path only
// handles the well-formed case with fields in the documented order
// (model_path before tensors; data_type and tensor_shape before
// tensor_content). On anything else it gives up on that entry, and the
// entry is parsed again by the gjson path, which alone words errors; so
// both paths always agree (FuzzParse checks it).

// cursor walks JSON text that gjson.ValidBytes has accepted. On valid text
// it never runs past the end; on other text it stays in bounds.
type cursor struct {
	s string
	i int
}

func (c *cursor) ws() {
	for c.i < len(c.s) {
		switch c.s[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (c *cursor) peek() byte {
	c.ws()
	if c.i >= len(c.s) {
		return 0
	}
	return c.s[c.i]
}

// skip moves past the next value and returns its text.
func (c *cursor) skip() string {
	c.ws()
	start := c.i
	if c.i >= len(c.s) {
		return ""
	}
	switch c.s[c.i] {
	case '"':
		c.skipString()
	case '[', '{':
		depth := 0
		for c.i < len(c.s) {
			switch c.s[c.i] {
			case '"':
				c.skipString()
				continue
			case '[', '{':
				depth++
			case ']', '}':
				depth--
				if depth == 0 {
					c.i++
					return c.s[start:c.i]
				}
			}
			c.i++
		}
	default:
		for c.i < len(c.s) {
			switch c.s[c.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return c.s[start:c.i]
			}
			c.i++
		}
	}
	return c.s[start:c.i]
}

// skipString moves past the string starting at c.i.
func (c *cursor) skipString() {
	c.i++
	for c.i < len(c.s) {
		switch c.s[c.i] {
		case '"':
			c.i++
			return
		case '\\':
			c.i++
		}
		c.i++
	}
	c.i = min(c.i, len(c.s))
}

// object walks the object at the cursor: f gets each key with the cursor at
// its value and must consume the value. It reports false if f did or the
// text ended.
func (c *cursor) object(f func(key string) bool) bool {
	if c.peek() != '{' {
		return false
	}
	c.i++
	for {
		switch c.peek() {
		case '}':
			c.i++
			return true
		case ',':
			c.i++
			continue
		case '"':
		default:
			return false
		}
		raw := c.skip()
		if len(raw) < 2 {
			return false
		}
		key := raw[1 : len(raw)-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = gjson.Parse(raw).Str
		}
		if c.peek() != ':' {
			return false
		}
		c.i++
		if c.peek() == 0 || !f(key) {
			return false
		}
	}
}

// array walks the array at the cursor: f is called with the cursor at each
// element and must consume it.
func (c *cursor) array(f func() bool) bool {
	if c.peek() != '[' {
		return false
	}
	c.i++
	for {
		switch c.peek() {
		case ']':
			c.i++
			return true
		case ',':
			c.i++
			continue
		case 0:
			return false
		}
		if !f() {
			return false
		}
	}
}

// requestFast parses the whole batch; ok false sends Parse to requestSlow
// (no or a repeated "request" field, or it is not an array).
func (p *parser) requestFast(doc string) (entries []Entry, ok bool, err error) {
	c := cursor{s: doc}
	seen := false
	ok = c.object(func(key string) bool {
		if key != "request" {
			c.skip()
			return true
		}
		if seen || c.peek() != '[' {
			return false
		}
		seen = true
		entries = []Entry{}
		return c.array(func() bool {
			if len(entries) >= p.lim.MaxEntries {
				err = p.tooManyEntries()
				return false
			}
			start := c.i
			e, ok := p.entryFast(&c, len(entries))
			if !ok {
				c.i = start
				e = p.entry(len(entries), gjson.Parse(c.skip()))
			}
			entries = append(entries, e)
			return true
		})
	})
	if err != nil {
		return nil, true, err
	}
	return entries, ok && seen, nil
}

// entryFast parses one well-formed entry in place; ok false means "parse it
// with entry", and the cursor is then anywhere inside the entry.
func (p *parser) entryFast(c *cursor, idx int) (Entry, bool) {
	at := loc{section: p.section, typ: p.typ, entry: idx, tensor: -1}
	var e Entry
	havePath, haveTensors := false, false
	start := len(p.tensorSlab)
	ok := c.object(func(key string) bool {
		switch key {
		case "model_path":
			if havePath {
				return false
			}
			havePath = true
			r := gjson.Parse(c.skip())
			if r.Type != gjson.String || !utf8.ValidString(r.Str) {
				return false
			}
			e.ModelPath = p.keepPath(r)
			at.path = e.ModelPath
			return true
		case "tensors":
			if haveTensors || !havePath {
				return false
			}
			haveTensors = true
			return c.array(func() bool {
				at.tensor = len(p.tensorSlab) - start
				if at.tensor >= p.lim.MaxTensors {
					return false
				}
				t, ok := p.tensorFast(c, &at)
				if ok {
					start = p.pushTensor(start, t)
				}
				return ok
			})
		}
		c.skip()
		return true
	})
	if !ok || !haveTensors {
		p.tensorSlab = p.tensorSlab[:start]
		return Entry{}, false
	}
	e.Tensors = p.entryTensors(start)
	p.prevTensors = e.Tensors
	return e, true
}

// tensorFast parses one well-formed tensor in place.
func (p *parser) tensorFast(c *cursor, at *loc) (tensor.Tensor, bool) {
	var t tensor.Tensor
	var name gjson.Result
	dt := tensor.Invalid
	var dims [MaxRank]int64
	rank, n := -1, int64(0)
	haveContent := false
	ok := c.object(func(key string) bool {
		switch key {
		case "tensor_name":
			if name.Exists() {
				return false
			}
			name = gjson.Parse(c.skip())
			return name.Type == gjson.String && utf8.ValidString(name.Str)
		case "data_type":
			if dt != tensor.Invalid {
				return false
			}
			r := gjson.Parse(c.skip())
			var ok bool
			dt, ok = tensor.ParseDType(r.Str)
			return r.Type == gjson.String && ok
		case "tensor_shape":
			if rank >= 0 {
				return false
			}
			raw := c.skip()
			if raw == "" || raw[0] != '[' {
				return false
			}
			var err error
			rank, n, err = parseShape(at, raw, &dims, p.minDim, p.lim.MaxElements)
			return err == nil
		case "tensor_content":
			if haveContent || dt == tensor.Invalid || rank < 0 {
				return false
			}
			haveContent = true
			var ok bool
			t.Data, ok = p.contentInPlace(c, at, dt, n)
			return ok
		}
		c.skip()
		return true
	})
	if !ok || !haveContent {
		return t, false
	}
	t.Shape = p.keepShape(dims[:rank])
	if name.Exists() {
		t.Name = p.keepName(at.tensor, name)
	}
	return t, true
}

// contentInPlace reads the tensor_content array at the cursor.
func (p *parser) contentInPlace(c *cursor, at *loc, dt tensor.DType, n int64) (any, bool) {
	if c.peek() != '[' {
		return nil, false
	}
	// Bound the allocation by the text: every value takes two bytes, and
	// the array ends at or after the first ']' (which the slow path
	// handles exactly when it comes too early, e.g. inside a string).
	if end := strings.IndexByte(c.s[c.i:], ']'); end < 0 || n > int64(end)/2 {
		return nil, false
	}
	sc := arrayScan{s: c.s, i: c.i + 1}
	data, err := scanContent(at, dt, int(n), &sc)
	if err != nil {
		return nil, false
	}
	c.i = sc.i + 1 // past the ']' the scan stopped at
	return data, true
}
