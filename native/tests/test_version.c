/* test_version.c — version string, error texts and the self-test. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "coc/coc.h"

int main(void)
{
    CHECK(strcmp(coc_version(), "0.1.0") == 0);
    CHECK(coc_selftest() == 0);
    CHECK(coc_is_coc_error(COC_EPROTO));
    CHECK(!coc_is_coc_error(-ECONNREFUSED));
    CHECK(strstr(coc_strerror(COC_ETRUNC), "truncated") != NULL);
    CHECK(strcmp(coc_strerror(-ECONNREFUSED), strerror(ECONNREFUSED)) == 0);
    CHECK(strcmp(coc_strerror(0), "success") == 0);
    CHECK_DONE();
}
