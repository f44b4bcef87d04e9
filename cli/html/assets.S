/* assets.S -- the HTML page's style and script, embedded into the CLI.
 *
 * The build concatenates cli/html/page.css into build/html/page.css and the
 * cli/html/ script parts, in the Makefile's HTML_JS order, into
 * build/html/page.js; this file puts each into read-only data as one
 * NUL-terminated string, vt_html_style and vt_html_script (declared in
 * cli/html/html.h). fmt_html.c hashes them for the content policy. */
    .section .rodata
    .globl vt_html_style
    .type vt_html_style, @object
vt_html_style:
    .incbin "build/html/page.css"
    .byte 0
    .size vt_html_style, . - vt_html_style
    .globl vt_html_script
    .type vt_html_script, @object
vt_html_script:
    .incbin "build/html/page.js"
    .byte 0
    .size vt_html_script, . - vt_html_script
    .section .note.GNU-stack,"",@progbits
