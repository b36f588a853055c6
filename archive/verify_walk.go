package archive

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/staging"
)

// segmentHeights is how many heights one verify worker reads at a time.
// Large enough that an iterator per segment costs nothing beside the
// records, small enough that the segments in flight stay a few MB.
const segmentHeights = 1024

// verdict is what a worker found at one height: the record's state and its
// hashes (copied out of the iterator), and a deep verify's findings.
type verdict struct {
	height       uint64
	hasRecord    bool
	err          error // the record or its index entry is corrupt
	hash, parent []byte
	problems     []deepProblem
}

type deepProblem struct {
	wrongHash bool // else undecodable
	reason    string
}

// segment is one worker's verdicts over [from, to], in height order, and
// the error that stopped its walk (a damaged file), if any.
type segment struct {
	verdicts []verdict
	err      error
}

// verifySegments walks [from, to] in segments of segmentHeights, cfg.Workers
// of them read at once, and hands every height's verdict to observe in
// height order, from one goroutine — so that a report built by observe is
// the one a single walk would build. A segment whose walk stopped ends the
// whole walk there (its error is returned), as one walk would stop.
func verifySegments(store *staging.Store, cfg VerifyConfig, from, to uint64, observe func(verdict)) error {
	window := make(chan chan segment, cfg.Workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer: one slot per segment, in order
		defer wg.Done()
		defer close(window)
		for a := from; ; a += segmentHeights {
			b := to
			if to-a >= segmentHeights {
				b = a + segmentHeights - 1
			}
			slot := make(chan segment, 1)
			select {
			case window <- slot:
			case <-stop:
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				slot <- verifySegment(store, cfg, a, b)
			}()
			if b == to {
				return
			}
		}
	}()
	var err error
	for slot := range window {
		seg := <-slot
		for _, v := range seg.verdicts {
			observe(v)
		}
		if seg.err != nil {
			err = seg.err
			break
		}
	}
	close(stop)
	for slot := range window { // what is in flight after a stop
		<-slot
	}
	wg.Wait()
	return err
}

// verifySegment reads [from, to] and judges every height there.
func verifySegment(store *staging.Store, cfg VerifyConfig, from, to uint64) segment {
	var seg segment
	var rows *chain.Rows
	if cfg.Deep && cfg.Decoder != nil {
		rows = chain.NewRows(cfg.Decoder.Tables())
	}
	var hashes []byte // one backing array for the segment's hashes
	seg.err = store.CheckRecords(from, to, cfg.Deep, func(st staging.RecordState) error {
		v := verdict{height: st.Height, hasRecord: st.HasRecord, err: st.Err}
		if st.Err != nil {
			seg.verdicts = append(seg.verdicts, v)
			return nil
		}
		hdr := st.Header
		n := len(hashes)
		hashes = append(hashes, hdr.Hash...)
		hashes = append(hashes, hdr.ParentHash...)
		v.hash = hashes[n : n+len(hdr.Hash) : n+len(hdr.Hash)]
		v.parent = hashes[n+len(hdr.Hash) : len(hashes) : len(hashes)]
		if cfg.Deep {
			if cfg.Recompute != nil {
				got, err := cfg.Recompute(st.Raw)
				var mm *chain.HashMismatchError
				switch {
				case errors.As(err, &mm):
					v.problems = append(v.problems, deepProblem{wrongHash: true, reason: err.Error()})
				case err != nil:
					v.problems = append(v.problems, deepProblem{reason: err.Error()})
				case !bytes.Equal(got, hdr.Hash):
					v.problems = append(v.problems, deepProblem{wrongHash: true, reason: fmt.Sprintf("staged hash %X, the record's header hashes to %X", hdr.Hash, got)})
				}
			}
			if rows != nil {
				rows.Reset()
				if err := cfg.Decoder.Decode(st.Height, st.Raw, rows); err != nil {
					v.problems = append(v.problems, deepProblem{reason: err.Error()})
				}
			}
		}
		seg.verdicts = append(seg.verdicts, v)
		return nil
	})
	return seg
}

// walker builds a StagingReport from verdicts given in height order.
type walker struct {
	r        *StagingReport
	cfg      VerifyConfig
	next     uint64 // the lowest height not yet seen
	prevHash []byte
	prevOK   bool // prevHash is the sound record at next-1
}

func (w *walker) observe(v verdict) {
	r, max := w.r, w.cfg.MaxListed
	list := func(list *[]Problem, count *int, h uint64, reason string) {
		*count++
		if len(*list) < max {
			*list = append(*list, Problem{Height: h, Reason: reason})
		}
	}
	if v.height > w.next {
		r.addGap(w.next, v.height-1, max)
		w.prevOK = false
	}
	w.next = v.height + 1
	if v.hasRecord {
		r.Records++
	}
	if v.err != nil {
		list(&r.Corrupt, &r.CorruptCount, v.height, v.err.Error())
		w.prevOK = false
		return
	}
	if w.prevOK && !bytes.Equal(v.parent, w.prevHash) {
		r.BreakCount++
		if len(r.Breaks) < max {
			r.Breaks = append(r.Breaks, Break{Height: v.height, ParentHash: bytes.Clone(v.parent), BelowHash: bytes.Clone(w.prevHash), Where: "staging"})
		}
	}
	w.prevHash, w.prevOK = append(w.prevHash[:0], v.hash...), true
	for _, p := range v.problems {
		if p.wrongHash {
			list(&r.WrongHash, &r.WrongHashCount, v.height, p.reason)
		} else {
			list(&r.Undecodable, &r.UndecodableCount, v.height, p.reason)
		}
	}
}
