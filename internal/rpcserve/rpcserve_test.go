package rpcserve

import (
	"encoding/json"
	"testing"
)

func TestParamHeight(t *testing.T) {
	tests := []struct {
		params string
		want   uint64
		ok     bool
	}{
		{`{"height":"12"}`, 12, true},
		{`{"height":12}`, 12, true},
		{`["0x1f", true]`, 31, true},
		{`["31"]`, 31, true},
		{` [ 5 ] `, 5, true},
		{`{"height":"-1"}`, 0, false},
		{`{"height":"0xzz"}`, 0, false},
		{`{}`, 0, false},
		{`[]`, 0, false},
		{``, 0, false},
		{`"12"`, 0, false},
	}
	for _, tc := range tests {
		got, err := ParamHeight(json.RawMessage(tc.params))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParamHeight(%s) = %d, %v; want %d, ok=%v", tc.params, got, err, tc.want, tc.ok)
		}
	}
}
