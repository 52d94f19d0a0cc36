package main

import "slices"

// commands are wizard's subcommands, in the order 'wizard help' lists
// them. A command is a [command] value in a file named after it; adding
// one is adding it here.
var commands = []*command{
	actCommand,
	benchCommand,
	describeCommand,
	emitCommand,
	explainCommand,
	healthCommand,
	initCommand,
	membersCommand,
	patternsCommand,
	replCommand,
	subCommand,
	versionCommand,
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	i := slices.IndexFunc(commands, func(c *command) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return commands[i]
}
