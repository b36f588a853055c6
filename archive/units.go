package archive

import (
	"fmt"
	"time"
)

// bytesText is a size as a person reads it: decimal units (1 kB = 1,000
// bytes, as "GB free" and du's sizes elsewhere are counted), one decimal,
// the largest unit that keeps the figure at least 1 ("~3.6 TB", never
// "3598413.6 MB").
func bytesText(b float64) string {
	if b < 1e3 {
		return fmt.Sprintf("%.0f B", b)
	}
	units := []string{"kB", "MB", "GB", "TB", "PB", "EB"}
	v := b / 1e3
	i := 0
	for ; v >= 999.95 && i < len(units)-1; i++ {
		v /= 1e3
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// durationText is a time as a person reads it: seconds, minutes and hours
// up to two days ("35h50m"), days beyond ("4.2 days"), never "1440h0m0s".
func durationText(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	if d = d.Round(time.Minute); d < 48*time.Hour {
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}
