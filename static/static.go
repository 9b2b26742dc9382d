// Package static holds the console's assets (style sheet, vendored scripts and their
// licences), embedded in the binary so that tekrar ships as one file.
package static

import (
	"embed"
	"io/fs"
)

//go:embed css js
var files embed.FS

// Files is the asset tree served under /static/.
var Files fs.FS = files
