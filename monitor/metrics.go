package monitor

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are a Monitor's Prometheus collectors. Counters carry what the
// job did since the process started; a scraper computes rates.
type metrics struct {
	fetched, staged, exported prometheus.Counter
	planned                   prometheus.Gauge
	rows                      *prometheus.CounterVec // by table
	batches, conflicts        prometheus.Counter
	exportCommit, stageCommit prometheus.Histogram
	rawBytes, storedBytes     prometheus.Counter
	ratio                     prometheus.Gauge
	requests                  *prometheus.CounterVec   // by endpoint, method, outcome
	requestDur                *prometheus.HistogramVec // by endpoint
	retries                   *prometheus.CounterVec   // by reason
	pgRetries                 *prometheus.CounterVec   // by cause
	rangeFrom, rangeTo, last  prometheus.Gauge
	rangeExported             prometheus.Gauge
	tip, lag                  prometheus.Gauge
	reorgs                    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "blockhaul", Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "blockhaul", Name: name, Help: help})
	}
	// Commits range from milliseconds (a small staging batch) to tens of
	// seconds (a large export batch on a slow disk).
	commitBuckets := prometheus.ExponentialBuckets(0.002, 2, 15)
	m := &metrics{
		fetched:  counter("heights_fetched_total", "Blocks returned by the source."),
		staged:   counter("heights_staged_total", "Blocks committed to staging."),
		exported: counter("heights_exported_total", "Heights committed to PostgreSQL."),
		planned:  gauge("fetch_planned_heights", "Heights missing from staging when the fetch started."),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "blockhaul", Name: "rows_exported_total", Help: "Rows committed to PostgreSQL, by table.",
		}, []string{"table"}),
		batches:   counter("export_batches_total", "Export batches committed."),
		conflicts: counter("export_conflicts_total", "Export batches merged after a unique violation."),
		exportCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "blockhaul", Name: "export_commit_duration_seconds",
			Help: "Duration of an export batch's commit.", Buckets: commitBuckets,
		}),
		stageCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "blockhaul", Name: "staging_commit_duration_seconds",
			Help: "Duration of a staging batch's commit.", Buckets: commitBuckets,
		}),
		rawBytes:    counter("staging_raw_bytes_total", "Uncompressed bytes of the blocks staged."),
		storedBytes: counter("staging_stored_bytes_total", "Compressed bytes of the blocks staged."),
		ratio:       gauge("staging_compression_ratio", "Raw bytes over stored bytes staged so far."),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "blockhaul", Name: "rpc_requests_total", Help: "RPC requests, by redacted endpoint, method and outcome.",
		}, []string{"endpoint", "method", "outcome"}),
		requestDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "blockhaul", Name: "rpc_request_duration_seconds",
			Help: "Duration of an RPC request, by redacted endpoint.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"endpoint"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "blockhaul", Name: "retries_total", Help: "Retries, by reason.",
		}, []string{"reason"}),
		pgRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "blockhaul", Name: "pg_retries_total", Help: "Operations on PostgreSQL tried again after a transient fault, by cause.",
		}, []string{"cause"}),
		rangeFrom: gauge("range_from", "First height of the job's range."),
		rangeTo:   gauge("range_to", "Last height of the job's range."),
		last:      gauge("last_exported_height", "Last height committed to PostgreSQL (the highest, when export streams split the range)."),
		rangeExported: gauge("range_exported_heights",
			"Heights of the job's range PostgreSQL holds, committed by any of its export streams, by this run or earlier ones."),
		tip:    gauge("chain_tip_height", "The chain tip the source last reported."),
		lag:    gauge("lag_heights", "Heights between the chain tip and the last height committed to PostgreSQL."),
		reorgs: counter("reorgs_repaired_total", "Chain reorganisations the head stream undid."),
	}
	reg.MustRegister(
		m.fetched, m.staged, m.exported, m.planned, m.rows, m.batches, m.conflicts,
		m.exportCommit, m.stageCommit, m.rawBytes, m.storedBytes, m.ratio,
		m.requests, m.requestDur, m.retries, m.pgRetries, m.rangeFrom, m.rangeTo, m.last, m.rangeExported,
		m.tip, m.lag, m.reorgs,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}
