package archive

import "testing"

// TestUnitsAPersonReads: sizes in the largest decimal unit that keeps the
// figure at least 1, times in days beyond two days.
func TestUnitsAPersonReads(t *testing.T) {
	for _, c := range []struct {
		bytes float64
		want  string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {5.6e3, "5.6 kB"}, {1 << 20, "1.0 MB"},
		{999.96e6, "1.0 GB"}, {3598413.6e6, "3.6 TB"}, {2.7e15, "2.7 PB"},
	} {
		if got := bytesText(c.bytes); got != c.want {
			t.Errorf("bytesText(%.0f) = %q, want %q", c.bytes, got, c.want)
		}
	}
	for _, c := range []struct {
		seconds float64
		want    string
	}{
		{0, "0s"}, {42.4, "42s"}, {59.6, "1m00s"}, {754, "12m34s"}, {3600, "1h00m"}, {129032, "35h51m"}, {172800, "2.0 days"}, {5e6, "57.9 days"},
	} {
		if got := durationText(c.seconds); got != c.want {
			t.Errorf("durationText(%v) = %q, want %q", c.seconds, got, c.want)
		}
	}
}
