package rpctest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func post(t *testing.T, url, body string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func batchBody(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"m","params":[` + strconv.Itoa(i) + `]}`)
	}
	b.WriteByte(']')
	return b.String()
}

func TestShuffleKeepsEveryAnswer(t *testing.T) {
	s := NewServer(Config{Shuffle: true, Seed: 1})
	defer s.Close()
	_, b, err := post(t, s.URL, batchBody(20))
	if err != nil {
		t.Fatal(err)
	}
	var resps []struct {
		ID     int
		Result []int
	}
	if err := json.Unmarshal(b, &resps); err != nil {
		t.Fatal(err)
	}
	inOrder, seen := true, map[int]bool{}
	for i, r := range resps {
		if r.ID != i {
			inOrder = false
		}
		if len(r.Result) != 1 || r.Result[0] != r.ID {
			t.Errorf("response %d: %+v", i, r)
		}
		seen[r.ID] = true
	}
	if len(seen) != 20 || inOrder {
		t.Errorf("want all 20 answers out of order, got %d answers, in order %v", len(seen), inOrder)
	}
	if s.Batches() != 1 || s.Calls() != 20 || s.MethodCalls("m") != 20 {
		t.Errorf("counters: batches %d calls %d", s.Batches(), s.Calls())
	}
}

func TestRandomIsDeterministic(t *testing.T) {
	f := Fault{Kind: Status, Status: 500}
	a, b := Random(42, 0.3, f), Random(42, 0.3, f)
	hits := 0
	for n := int64(1); n <= 1000; n++ {
		if a(n) != b(n) {
			t.Fatalf("request %d: schedules with one seed disagree", n)
		}
		if a(n).Kind == Status {
			hits++
		}
	}
	if hits < 200 || hits > 400 {
		t.Errorf("%d of 1000 faulted at p=0.3", hits)
	}
}

func TestBatchPoliciesAndLimits(t *testing.T) {
	for _, tc := range []struct {
		cfg    Config
		status int
		want   string
	}{
		{Config{Batch: BatchRefuseHTTP}, 400, "not supported"},
		{Config{Batch: BatchRefuseRPC}, 200, "not supported"},
		{Config{MaxBatch: 2}, 413, "batch too large"},
	} {
		s := NewServer(tc.cfg)
		resp, b, err := post(t, s.URL, batchBody(3))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status || !bytes.Contains(b, []byte(tc.want)) || bytes.HasPrefix(b, []byte("[")) {
			t.Errorf("%+v: status %d body %s", tc.cfg, resp.StatusCode, b)
		}
	}
}

func TestDieAfter(t *testing.T) {
	s := NewServer(Config{DieAfter: 2})
	defer s.Close()
	for i := range 2 {
		if _, _, err := post(t, s.URL, `{"jsonrpc":"2.0","id":1,"method":"m"}`); err != nil {
			t.Fatalf("request %d before death: %v", i+1, err)
		}
	}
	_, _, err := post(t, s.URL, `{"jsonrpc":"2.0","id":1,"method":"m"}`)
	if err == nil {
		t.Fatal("third request served by a dead server")
	}
	_, _, err = post(t, s.URL, `{"jsonrpc":"2.0","id":1,"method":"m"}`)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after death: %v, want connection refused", err)
	}
	if s.Calls() != 2 {
		t.Errorf("%d calls answered, want 2", s.Calls())
	}
}
