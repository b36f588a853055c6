package pipeline

import (
	"slices"
	"strings"

	"github.com/blockhaul/blockhaul/export"
)

// validateTables reads --tables and --replay against the chain family's
// tables into SelectedTables: an unknown name is refused naming it and the
// valid ones.
func (c *Config) validateTables() []*FieldError {
	c.SelectedTables = nil
	if c.Tables == "" && len(c.Replay) == 0 {
		return nil
	}
	var fs []*FieldError
	bad := func(flag, msg string) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: msg})
	}
	dec, err := familyDecoder(c)
	if err != nil {
		return nil // --chain says what is wrong
	}
	all := dec.Tables()
	if c.Tables != "" {
		if !slices.Contains([]string{CmdRun, CmdExport, CmdFollow}, c.Command) {
			bad("tables", "chooses the tables run, export and follow write; "+c.Command+" does not write tables")
		} else if names, err := export.ParseTables(c.Tables, all); err != nil {
			bad("tables", err.Error())
		} else {
			c.SelectedTables = names
		}
	}
	if len(c.Replay) == 0 {
		return fs
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
		c.SelectedTables = names
		if c.ExportStreams > 1 {
			bad("export-streams", "a replay is one stream; leave out --export-streams")
		}
	}
	return fs
}
