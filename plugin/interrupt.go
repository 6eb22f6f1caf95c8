package plugin

import "context"

// untilDone runs f and returns what it returns, or ctx's error as soon as
// ctx is cancelled (the first Ctrl-C): a parse or an analysis of a big
// input does not look at ctx and would run to its end, seconds more. What
// f was doing is abandoned, to end with the process; f must own what it
// reads (a bundle it closes itself), since its caller returns at once.
func untilDone[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f() // never cancelled: no goroutine
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // an abandoned f still sends, and ends
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
