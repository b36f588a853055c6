package pipeline

import (
	"slices"

	"github.com/blockhaul/blockhaul/export"
)

// validateTables reads --tables against the chain family's
// tables into SelectedTables: an unknown name is refused naming it and the
// valid ones.
func (c *Config) validateTables() []*FieldError {
	c.SelectedTables = nil
	if c.Tables == "" {
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
	return fs
}
