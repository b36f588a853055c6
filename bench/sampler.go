package bench

import (
	"sync"
	"sync/atomic"
	"time"
)

// sampler records a load's cumulative blocks and rows every interval and
// at every commit, for the throughput-over-time plots. add is called by the
// load after each committed batch; the sampling goroutine only reads the
// counters. It ends in finish, which its starter must call.
type sampler struct {
	start        time.Time
	blocks, rows atomic.Uint64

	mu      sync.Mutex
	samples []Sample
	commits []Sample

	stop chan struct{}
	done chan struct{}
}

func startSampler(every time.Duration) *sampler {
	s := &sampler{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	s.samples = append(s.samples, Sample{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.record()
			}
		}
	}()
	return s
}

func (s *sampler) add(blocks, rows uint64) {
	c := Sample{Blocks: s.blocks.Add(blocks), Rows: s.rows.Add(rows), Seconds: time.Since(s.start).Seconds()}
	s.mu.Lock()
	s.commits = append(s.commits, c)
	s.mu.Unlock()
}

func (s *sampler) record() {
	smp := Sample{Seconds: time.Since(s.start).Seconds(), Blocks: s.blocks.Load(), Rows: s.rows.Load()}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
}

// finish stops sampling, records the final counts and returns the periodic
// samples and the commits.
func (s *sampler) finish() (samples, commits []Sample) {
	close(s.stop)
	<-s.done
	s.record()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.commits
}
