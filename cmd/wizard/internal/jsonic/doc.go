// Package jsonic parses the message text the wizard command line takes:
// JSON, or what MicroWizard and Seneca users type, key:value pairs
// without braces or quotes.
//
//	role:math,cmd:sum,a:1,b:2
//	user:{name:ada,tags:[x,y]},n:1.5,ok:true,none:null
//	{"role":"math","values":[1,2]}
//
// Keys and values may be bare (letters, digits and most punctuation;
// surrounding spaces are trimmed) or quoted, "..." with JSON's escapes or
// '...' with \' and \\. Bare values that are JSON numbers are numbers
// (kept exact as json.Number), true and false are booleans, null is nil;
// everything else is a string. A bare value cannot hold , : { } [ or a
// quote: quote it. Pairs and list items are separated by commas; a
// trailing comma is allowed. Errors are a [*SyntaxError] with the byte
// offset, line and column of the problem.
package jsonic
