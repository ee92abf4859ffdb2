package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration as a Go duration ("5s", "1m30s", "250ms")
// or as a plain integer number of milliseconds ("5000"): settings that were
// once milliseconds-only keep working, and the unit can be said.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > math.MaxInt64/int64(time.Millisecond) || n < math.MinInt64/int64(time.Millisecond) {
			return 0, fmt.Errorf("%d milliseconds is out of range", n)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration (5s, 1m30s, 250ms) nor a whole number of milliseconds", s)
	}
	return d, nil
}

// durationValue is a flag.Value read with ParseDuration.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// DurationVar defines a duration flag on fs that accepts a Go duration or
// plain milliseconds (ParseDuration), unlike fs.DurationVar. The help says
// so after usage, and shows the flag as "-name duration".
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage+durationHelp)
}

// durationHelp ends every duration flag's help; the back-quoted word is
// the value's name in PrintDefaults.
const durationHelp = " (a Go `duration` like 5s, or milliseconds)"

// Duration is DurationVar returning the variable.
func Duration(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	DurationVar(fs, p, name, value, usage)
	return p
}

// ParseInterleaved parses args with fs (flag.ContinueOnError) allowing
// flags before, between and after positional arguments, and returns the
// positional arguments in order. "--" ends the flags: everything after it
// is positional. Errors are as ParseFlags returns them.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := ParseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// fs.Parse stops at the first non-flag, or consumes a "--": tell
		// them apart by what it left.
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// UndocumentedDefaults names the flags of fs whose help does not state
// their default: the flag package prints "(default X)" only for a
// non-zero default, so a flag whose default is the zero value ("" or 0)
// must say in its usage what that means, with the word "default" or
// "none". Boolean switches are off unless given and need not say so.
func UndocumentedDefaults(fs *flag.FlagSet) []string {
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			return // a switch: off unless given
		}
		if isZeroDefault(f) && !strings.Contains(f.Usage, "default") && !strings.Contains(f.Usage, "none") {
			missing = append(missing, f.Name)
		}
	})
	return missing
}

func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "0s", "false", "[]":
		return true
	}
	return false
}
