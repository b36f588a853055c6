package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/internal/testbin"
)

// blockhaulEnv runs the binary with the BLOCKHAUL_* variables of env only.
func blockhaulEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(testbin.CleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("run blockhaul: %v", err)
	}
	return 0, string(out)
}

const noPG = "postgres://127.0.0.1:1/nothing?sslmode=disable"

// TestBadInputRefusedBeforeAnythingStarts: every input issue 12 found
// accepted, or failing late, is refused with status 2, each problem named
// (all of them at once), nothing created, and no credential echoed.
func TestBadInputRefusedBeforeAnythingStarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    []string
		want   []string
		secret string // must not appear in the output
	}{
		{name: "rps NaN", args: []string{"run", "--rps", "NaN"}, want: []string{"--rps (BLOCKHAUL_RPS)", "NaN"}},
		{name: "rps +Inf", args: []string{"run", "--rps", "+Inf"}, want: []string{"--rps", "+Inf"}},
		{name: "synthetic txs NaN", args: []string{"fetch", "--synthetic-txs", "NaN"}, want: []string{"--synthetic-txs"}},
		{name: "synthetic txs huge", args: []string{"fetch", "--synthetic-txs", "1e9"}, want: []string{"--synthetic-txs", "1e+09"}},
		{name: "rpc port", args: []string{"fetch", "--rpc", "http://127.0.0.1:99999"}, want: []string{"--rpc", "port out of range"}},
		{name: "rpc twice", args: []string{"fetch", "--rpc", "http://127.0.0.1:26657,http://127.0.0.1:26657/"}, want: []string{"--rpc", "endpoint 1 again"}},
		{name: "http not an addr", args: []string{"run", "--http", "not-an-addr"}, want: []string{"--http", "not-an-addr"}},
		{name: "fetch span", args: []string{"fetch", "--fetch-span", "100000000"}, want: []string{"--fetch-span", "100000000"}},
		{name: "batch blocks", args: []string{"run", "--batch-blocks", "100000000"}, want: []string{"--batch-blocks", "100000000"}},
		{name: "export streams 0", args: []string{"export", "--export-streams", "0"}, want: []string{"--export-streams", "want auto or 1 to 64"}},
		{name: "export streams word", args: []string{"run", "--export-streams", "many"}, want: []string{"--export-streams", "want auto or 1 to 64"}},
		{name: "export streams from env", args: []string{"run"}, env: []string{"BLOCKHAUL_EXPORT_STREAMS=65"}, want: []string{"--export-streams", "want auto or 1 to 64"}},
		{name: "defer-indexes with a space", args: []string{"run", "--defer-indexes", "never"}, want: []string{"did you mean --defer-indexes=never?"}},
		{name: "positional heights", args: []string{"run", "1", "100"}, want: []string{"did you mean --from 1 --to 100?"}},
		{name: "positional word", args: []string{"fetch", "now"}, want: []string{`stray argument "now"`}},
		{name: "second command", args: []string{"fetch", "export"}, want: []string{`a second command "export"`}},
		{name: "flag before the command", args: []string{"--to", "9", "fetch"}, want: []string{"--to 9 comes before the command fetch", "blockhaul fetch --to 9"}},
		{name: "flag and no command", args: []string{"--to", "9"}, want: []string{"no command"}},
		{name: "unknown command", args: []string{"fecth"}, want: []string{"did you mean fetch?"}},
		{name: "unknown flag", args: []string{"fetch", "--form", "3"}, want: []string{"unknown flag --form: did you mean --from?"}},
		{name: "empty staging", args: []string{"fetch", "--staging", ""}, want: []string{"--staging (BLOCKHAUL_STAGING)", "is empty"}},
		{name: "empty staging from env", args: []string{"fetch"}, env: []string{"BLOCKHAUL_STAGING="}, want: []string{"--staging", "is empty"}},
		{name: "cometbft from 0", args: []string{"fetch", "--from", "0", "--to", "5"}, want: []string{"--from", "start at 1"}},
		{name: "to 0", args: []string{"fetch", "--to", "0"}, want: []string{"--to", "0 is below --from 1"}},
		{name: "alias newline", args: []string{"run", "--alias", "a\nb"}, want: []string{"--alias", "U+000A"}},
		{name: "alias long", args: []string{"run", "--alias", strings.Repeat("a", 3000)}, want: []string{"--alias", "3000 bytes"}},
		{name: "bad env beside bad flags", args: []string{"run", "--rps", "NaN"},
			env:  []string{"BLOCKHAUL_FETCH_WORKERS=many", "BLOCKHAUL_BATCH_BLOCKS=0"},
			want: []string{"--fetch-workers (BLOCKHAUL_FETCH_WORKERS)", `"many"`, "--batch-blocks", "--rps"}},
		{name: "from alias and primary disagree", args: []string{"fetch"}, env: []string{"BLOCKHAUL_FROM=5", "BLOCKHAUL_FROM_HEIGHT=6"},
			want: []string{"BLOCKHAUL_FROM_HEIGHT and BLOCKHAUL_FROM are both set"}},
		{name: "unknown env warned", args: []string{"fetch", "--rps", "NaN"}, env: []string{"BLOCKHAUL_FTECH_WORKERS=2"},
			want: []string{"BLOCKHAUL_FTECH_WORKERS is not a blockhaul variable", "did you mean BLOCKHAUL_FETCH_WORKERS?"}},
		{name: "rpc not CSV, flag", args: []string{"fetch", "--rpc", `http://node.example/rpc/s3cr3tk3y"x`},
			want: []string{"--rpc", "quoting mistake"}, secret: "s3cr3tk3y"},
		{name: "rpc not CSV, env", args: []string{"fetch"}, env: []string{`BLOCKHAUL_RPC=http://node.example/rpc/s3cr3tk3y"x`},
			want: []string{"--rpc", "quoting mistake"}, secret: "s3cr3tk3y"},
		{name: "pg password on the command line", args: []string{"status", "--pg", "postgres://u:hunter2pw@127.0.0.1:1/x", "--rps", "NaN"},
			want: []string{"warning: --pg holds a password", "BLOCKHAUL_PG", "PGPASSWORD", "PGPASSFILE"}, secret: "hunter2pw"},
		{name: "every problem at once", args: []string{"run", "1", "100", "--rps", "NaN", "--http", "x", "--defer-indexes", "never", "--fetch-span", "0"},
			env:  []string{"BLOCKHAUL_SYNTHETIC_TXS=lots"},
			want: []string{"--from 1 --to 100", "--rps", "--http", "--defer-indexes=never", "--fetch-span", "BLOCKHAUL_SYNTHETIC_TXS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stg := filepath.Join(t.TempDir(), "staging")
			args := append(slicesClone(tc.args), "--staging", stg, "--synthetic-tip", "50")
			if strings.HasPrefix(tc.name, "empty staging") || tc.name == "flag and no command" {
				args = tc.args
			}
			if args[0] == "run" {
				args = append(args, "--pg", noPG)
			}
			code, out := blockhaulEnv(t, tc.env, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not name %q:\n%s", w, out)
				}
			}
			if tc.secret != "" && strings.Contains(out, tc.secret) {
				t.Errorf("output shows the credential %q:\n%s", tc.secret, out)
			}
			if _, err := os.Stat(stg); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused invocation created %s (%v)", stg, err)
			}
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestGoodInputRuns: what the checks must not refuse.
func TestGoodInputRuns(t *testing.T) {
	stg := filepath.Join(t.TempDir(), "staging")
	// --chain in capitals, and the height range from the short variables.
	code, out := blockhaulEnv(t, []string{"BLOCKHAUL_FROM=5", "BLOCKHAUL_TO=9", "BLOCKHAUL_PG_THROWAWAY=1"},
		"fetch", "--chain", "EVM", "--staging", stg, "--progress-interval", "0", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("fetch exited %d:\n%s", code, out)
	}
	if strings.Contains(out, "not a blockhaul variable") {
		t.Errorf("a variable of the scripts drew a warning:\n%s", out)
	}
	code, out = blockhaul(t, "status", "--staging", stg, "--chain", "evm")
	if code != 0 || !strings.Contains(out, "5 blocks in 5-9") {
		t.Fatalf("status exited %d; want 5 blocks in 5-9 staged:\n%s", code, out)
	}
	// The help shows no invalid default for --to.
	code, out = blockhaul(t, "fetch", "--help")
	if code != 0 || !strings.Contains(out, "--to ") || strings.Contains(out, `BLOCKHAUL_TO_HEIGHT] (default "0")`) {
		t.Fatalf("fetch --help exited %d, or shows --to's default as 0:\n%s", code, out)
	}
	// --export-streams defaults to auto and says how auto chooses.
	code, out = blockhaul(t, "export", "--help")
	// (The help is wrapped: the rule is read with its lines joined.)
	if code != 0 || !strings.Contains(out, "[BLOCKHAUL_EXPORT_STREAMS] (default auto)") || !strings.Contains(strings.Join(strings.Fields(out), " "), "3/4 of the CPUs") {
		t.Fatalf("export --help exited %d, or does not give --export-streams' default auto and its rule:\n%s", code, out)
	}
}

// TestUnparsedFlagSaidOnce: a --to of 2^64 is refused for not parsing,
// and only for that (before: also "0 is below --from 1", of the value it
// was not given).
func TestUnparsedFlagSaidOnce(t *testing.T) {
	code, out := blockhaul(t, "fetch", "--to", "18446744073709551616", "--staging", filepath.Join(t.TempDir(), "s"))
	if code != 2 || !strings.Contains(out, `"18446744073709551616"`) || strings.Contains(out, "is below --from") || strings.Count(out, "--to (") != 1 {
		t.Errorf("exit %d:\n%s\nwant exit 2 and one problem with --to, its value", code, out)
	}
}
