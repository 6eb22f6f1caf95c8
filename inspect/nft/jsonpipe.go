package nft

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
)

// Most of a big nft -j listing is rules, and a rule's text depends on its
// object alone. So the objects of the "nftables" array are read in
// batches: one goroutine frames them (finds where each ends), workers
// parse and render the rules of a batch on every core, and the builder
// takes the batches in order. Everything else (tables, chains, sets,
// elements) is built in order by jsonObject as before, and so is every
// object once framing meets something it cannot frame, so errors and
// warnings are those of the one-at-a-time reader (a test compares them).

const (
	batchObjects = 512     // objects per batch …
	batchBytes   = 1 << 20 // … or bytes, whichever comes first
)

type jsonBatch struct {
	first int      // index in the array of objs[0]
	objs  []string // the objects' bytes, in place in the read buffers
	ends  []int64  // input offset after each object, for errors
	// set by the worker: for each object, a prepared rule or set, or
	// nothing (built in order by jsonObject)
	prepared []prepared
	errAt    int // the first object that did not parse, or -1
	err      error
	done     chan struct{}
}

// reset empties a batch the builder is done with, for use again.
func (bt *jsonBatch) reset() {
	clear(bt.objs)
	clear(bt.prepared) // drop what the builder took
	bt.objs, bt.ends, bt.prepared = bt.objs[:0], bt.ends[:0], bt.prepared[:0]
	bt.err = nil
}

// framerEnd is how the framing goroutine stopped.
type framerEnd struct {
	count      int   // objects framed and handed on
	closed     bool  // at the array's ']'
	commaTaken bool  // the ',' before object count is consumed
	err        error // a stream error, or nil: the rest is read one at a time
}

// jsonArrayParallel reads the array's objects in batches (see above).
// Unless done, the rest of the array is to be read one object at a time
// from st, starting with object end.count.
func jsonArrayParallel(st *jsonStream, p *jsonParser, b *builder, w *renderer) (end framerEnd, done bool, err error) {
	workers := runtime.GOMAXPROCS(0)
	work := make(chan *jsonBatch, workers)
	order := make(chan *jsonBatch, 2*workers)
	// batches the builder is done with, for the framer to fill again (a
	// batch's arrays are big: reused, they cost no fresh memory)
	free := make(chan *jsonBatch, 4*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the framer: st is its own until order is closed
		defer wg.Done()
		defer close(order)
		defer close(work)
		end = frameBatches(st, work, order, free, stop)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var wp jsonParser
			wr := &renderer{}
			for bt := range work {
				prepareBatch(bt, &wp, wr)
				close(bt.done)
			}
		}()
	}
	// On an error the builder stops: the framer and workers are told to
	// stop and waited for, so nothing outlives the call.
	defer func() {
		close(stop)
		for bt := range order {
			<-bt.done
		}
		wg.Wait()
	}()
	for bt := range order {
		<-bt.done
		for k, raw := range bt.objs {
			i := bt.first + k
			if bt.errAt == k {
				return end, true, fmt.Errorf("nft JSON: offset %d: %w", bt.ends[k], fmt.Errorf("object %d: %w", i, bt.err))
			}
			if b.addPrepared(&bt.prepared[k], i) {
				continue
			}
			v, perr := p.parse(raw)
			if perr != nil {
				return end, true, fmt.Errorf("nft JSON: offset %d: %w", bt.ends[k], fmt.Errorf("object %d: %w", i, perr))
			}
			b.jsonObject(v, w, i)
		}
		bt.reset()
		select {
		case free <- bt:
		default:
		}
	}
	wg.Wait()
	if end.err != nil {
		return end, true, st.wrap(end.err)
	}
	return end, end.closed, nil
}

// frameBatches frames the array's objects into batches, handing each to
// the workers and, in order, to the builder. It stops before anything it
// cannot frame as an object (leaving st there), at the closing ']', or
// when told to.
func frameBatches(st *jsonStream, work, order chan<- *jsonBatch, free <-chan *jsonBatch, stop <-chan struct{}) framerEnd {
	i := 0
	var bt *jsonBatch
	size := 0
	send := func() bool {
		if bt == nil {
			return true
		}
		select {
		case order <- bt:
		case <-stop:
			return false
		}
		select {
		case work <- bt:
		case <-stop:
			close(bt.done) // never prepared; the builder has stopped
			return false
		}
		bt, size = nil, 0
		return true
	}
	for {
		select {
		case <-stop:
			return framerEnd{count: i}
		default:
		}
		c, err := st.peek()
		if err != nil {
			send()
			return framerEnd{count: i, err: err}
		}
		if c == ']' {
			st.pos++
			send()
			return framerEnd{count: i, closed: true}
		}
		if i > 0 {
			if c != ',' {
				send()
				return framerEnd{count: i}
			}
			st.pos++
			if c, err = st.peek(); err != nil || c != '{' {
				send()
				return framerEnd{count: i, commaTaken: true}
			}
		} else if c != '{' {
			return framerEnd{count: i}
		}
		obj, err := st.frame()
		if err != nil || obj == "" {
			// nothing framed, st is at the object: the one-at-a-time
			// reader goes on from it and reports what is wrong
			send()
			return framerEnd{count: i, commaTaken: i > 0}
		}
		if bt == nil {
			select {
			case bt = <-free:
			default:
				bt = &jsonBatch{}
			}
			bt.first, bt.errAt, bt.done = i, -1, make(chan struct{})
		}
		bt.objs = append(bt.objs, obj)
		bt.ends = append(bt.ends, st.base+int64(st.pos))
		size += len(obj)
		i++
		if len(bt.objs) >= batchObjects || size >= batchBytes {
			if !send() {
				return framerEnd{count: i}
			}
		}
	}
}

// prepareBatch parses a batch's rules, chains, sets and maps, and renders
// the rules.
func prepareBatch(bt *jsonBatch, p *jsonParser, w *renderer) {
	if cap(bt.prepared) >= len(bt.objs) {
		bt.prepared = bt.prepared[:len(bt.objs)] // cleared by reset
	} else {
		bt.prepared = make([]prepared, len(bt.objs))
	}
	for k, raw := range bt.objs {
		kind := firstKey(raw)
		if kind != "rule" && kind != "set" && kind != "map" && kind != "chain" {
			continue // parsed once, in order, by jsonObject
		}
		o, err := p.parse(raw)
		if err != nil {
			bt.errAt, bt.err = k, err
			return
		}
		// kind 0 when it lacks a name or table: jsonObject warns, in order
		bt.prepared[k] = prepareObject(kind, o.kid(0), w)
	}
}

// firstKey returns an object's first member name when it is plain (no
// escapes): the kind jsonObject reads the object as.
func firstKey(obj string) string {
	i := 1
	for i < len(obj) && (obj[i] == ' ' || obj[i] == '\t' || obj[i] == '\n' || obj[i] == '\r') {
		i++
	}
	if i >= len(obj) || obj[i] != '"' {
		return ""
	}
	end := strings.IndexAny(obj[i+1:], "\"\\")
	if end < 0 {
		return ""
	}
	return obj[i+1 : i+1+end]
}
