package bench

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/blockhaul/blockhaul/archive"
)

// RatesFile is where WriteRates writes the estimate's rates, from the
// module's root (archive embeds it: archive.MeasuredRates).
const RatesFile = "archive/rates.json"

// Rates returns what the estimate keeps of a bench result (its JSON, as
// WriteFiles writes it): archive.MeasuredRun, indented.
func Rates(result []byte) ([]byte, error) {
	var m archive.MeasuredRun
	if err := json.Unmarshal(result, &m); err != nil {
		return nil, fmt.Errorf("bench: rates of a result: %w", err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: rates of a result: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteRates writes the rates of r to path (RatesFile, for a whole run
// that becomes latest.*), so that the next build's estimate reads them.
func WriteRates(path string, r Result) error {
	js, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bench: encode result: %w", err)
	}
	b, err := Rates(js)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
