package jsonrpc

// ParseBatchBody runs the client's batch response parsing over body for
// calls sent with ids 1..len(calls). It returns how many calls were left
// unanswered and the outcome's error. External tests (which may import the
// chain families that import this package) reach parseBatch through it.
func ParseBatchBody(body []byte, calls []Call) (unanswered int, err error) {
	ep := &endpoint{name: "bench"}
	part := make([]request, len(calls))
	for i := range calls {
		calls[i].Err, calls[i].answered = nil, false
		part[i] = request{call: &calls[i]}
	}
	rest, oc := parseBatch(ep, body, part, 1)
	return len(rest), oc.err
}
