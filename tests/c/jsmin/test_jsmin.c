/* core/jsmin: comments and inessential whitespace go; strings, template literals and
 * regular expressions stay byte for byte; a line break stays where a statement could end
 * there; what it cannot read safely is refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jsmin.h"

static void is(const char *js, const char *want)
{
    size_t n = strlen(js), len = 0;
    char *out = malloc(n + 1);
    int rc = gt_jsmin(js, n, out, &len, NULL);
    if (!rc)
        out[len] = '\0';
    CHECK(rc == 0 && !strcmp(out, want), "%s -> [%s], want [%s]", js, rc ? "error" : out, want);
    free(out);
}

static void refused(const char *js, size_t at)
{
    size_t len = 0, got = (size_t)-1;
    char *out = malloc(strlen(js) + 1);
    int rc = gt_jsmin(js, strlen(js), out, &len, &got);
    CHECK(rc == -EINVAL && got == at, "%s: rc %d at %zu, want -EINVAL at %zu", js, rc, got, at);
    free(out);
}

int main(void)
{
    /* comments and indentation */
    is("  var a = 1; // one\n  /* two\n three */\n  var b = a + 2;\n", "var a=1;var b=a+2;\n");
    is("f(a /* x */, b);", "f(a,b);");
    is("var a/* x */=b;", "var a=b;");
    is("return/* x */a;", "return a;");
    /* strings keep everything inside, quotes and escapes included */
    is("x = ' a // b /* c */ ' + \"d \\\" // e\";", "x=' a // b /* c */ '+\"d \\\" // e\";");
    is("s = 'it\\'s  //';", "s='it\\'s  //';");
    is("t = `a  // b\n  c`;", "t=`a  // b\n  c`;");
    /* regular expressions: after an operator, '(' or a keyword; '/' in a class; escapes */
    is("x = s.replace(/ \\u00b7 .*$/, '');", "x=s.replace(/ \\u00b7 .*$/,'');");
    is("if (/^\\s*[{[]/.test(s)) return /a b/g;", "if(/^\\s*[{[]/.test(s))return/a b/g;");
    is("r = /(^|[\\/\\\\]) x/;", "r=/(^|[\\/\\\\]) x/;");
    is("r = a ? /x y/ : /z w/;", "r=a?/x y/:/z w/;");
    /* division after an operand: a name, a number, ')' or ']' */
    is("q = a / b / 2 + (c) / d + e[0] / f;", "q=a/b/2+(c)/d+e[0]/f;");
    is("q = /x/g / 2;", "q=/x/g/2;");
    /* spaces that keep tokens apart */
    is("a = b + +c - -d; e = f - - g;", "a=b+ +c- -d;e=f- -g;");
    is("var x = typeof y in z;", "var x=typeof y in z;");
    is("a = 1 / /re/.exec(s).length;", "a=1/ /re/.exec(s).length;");
    /* line breaks: kept where a statement may end, dropped where none can */
    is("a = b\nc = d\n", "a=b\nc=d\n");
    is("i++\nj--\n", "i++\nj--\n");
    is("return\nx;", "return\nx;");
    is("f(a,\n  b);\nx = {\n  a: 1\n};\n", "f(a,b);x={a:1};\n");
    is("a\n  .b()\n  .c();\n", "a.b().c();\n");
    is("x = a &&\n  b;\n", "x=a&&b;\n");
    is("x = a\n  ? b\n  : c;\n", "x=a?b:c;\n");
    is("", "");
    /* refused: unterminated, or a template substitution */
    refused("x = 'abc\ny';", 4);
    refused("x = /abc\n/;", 4);
    refused("x = 1; /* never closed", 7);
    refused("x = `a${b}`;", 4);
    refused("x = \"abc", 4);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
