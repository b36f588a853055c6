package pipeline

import (
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
)

// validateTables reads --tables and --replay against all, the chain
// family's tables: the tables the job writes (nil for every one of them).
// An unknown name is refused naming it and the valid ones.
func (c *Config) validateTables(all []chain.Table) (selected []string, fs []*FieldError) {
	if c.Tables == "" && len(c.Replay) == 0 {
		return nil, nil
	}
	bad := func(flag, msg string) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: msg})
	}
	if c.Tables != "" {
		if cmd := commandNamed(c.Command); cmd == nil || !cmd.writes {
			bad("tables", "chooses the tables run, export and follow write; "+c.Command+" does not write tables")
		} else if names, err := export.ParseTables(c.Tables, all); err != nil {
			bad("tables", err.Error())
		} else {
			selected = names
		}
	}
	if len(c.Replay) == 0 {
		return selected, fs
	}
	switch {
	case c.Command != CmdExport:
		bad("replay", "only export replays tables (blockhaul export --replay TABLE)")
	case c.Tables != "":
		bad("replay", "names the tables it writes: leave out --tables")
	default:
		names, err := export.ParseTables(strings.Join(c.Replay, ","), all)
		if err != nil {
			bad("replay", err.Error())
			break
		}
		selected = names
		if c.ExportStreams > 1 {
			bad("export-streams", "a replay is one stream; leave out --export-streams")
		}
	}
	return selected, fs
}
