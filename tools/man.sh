#!/bin/sh
# tools/man.sh NAME VERSION < help > NAME.1: a command's man page made from
# its --help, which every gocoll command writes in one shape
# (internal/cmdhelp; the wrappers by hand): "NAME - SUMMARY", a blank line,
# the "usage:" lines, then the text (with a "flags:" part). The help stays
# the one place a command is described; tools/install.sh calls this.
set -eu
name=${1:?usage: tools/man.sh NAME VERSION}
version=${2:?usage: tools/man.sh NAME VERSION}
awk -v name="$name" -v version="$version" '
function esc(s) {
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	if (s ~ /^[.'\'']/) s = "\\&" s
	return s
}
NR == 1 {
	split($0, a, " - ")
	if (a[1] != name || a[2] == "") { print "man.sh: " name " --help does not start with \"" name " - summary\"" > "/dev/stderr"; exit 1 }
	printf ".TH %s 1 \"\" \"gocoll %s\" \"gocoll manual\"\n.SH NAME\n%s \\- %s\n", toupper(name), version, esc(name), esc(substr($0, length(name) + 4))
	next
}
/^usage: / && !synopsis { synopsis = 1; print ".SH SYNOPSIS\n.nf"; sub(/^usage: /, "") }
synopsis == 1 && /^$/ { synopsis = 2; print ".fi\n.SH DESCRIPTION\n.nf"; next }
synopsis == 1 { sub(/^       /, ""); print esc($0); next }
/^flags:$/ { print ".fi\n.SH OPTIONS\n.nf"; next }
synopsis == 2 { print esc($0) }
END {
	if (NR > 1 && !synopsis) { print "man.sh: " name " --help has no usage: line" > "/dev/stderr"; exit 1 }
	if (synopsis == 1) print ".fi"
	if (synopsis == 2) print ".fi"
	print ".SH SEE ALSO\nThe gocoll documentation: share/doc/gocoll/README.md under the installation prefix."
}'
