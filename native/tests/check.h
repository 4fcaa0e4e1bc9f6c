/* check.h — a tiny check header for the C unit tests: one process per test binary. */
#ifndef COC_TEST_CHECK_H
#define COC_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
            check_failures++;                                                           \
        }                                                                               \
    } while (0)

#define CHECK_RC(expr)                                                                  \
    do {                                                                                \
        int check_rc_ = (expr);                                                         \
        if (check_rc_ < 0) {                                                            \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #expr,  \
                    check_rc_, coc_strerror(check_rc_));                                \
            check_failures++;                                                           \
        }                                                                               \
    } while (0)

#define CHECK_DONE()                                                                    \
    do {                                                                                \
        if (check_failures) {                                                           \
            fprintf(stderr, "%s: %d check(s) failed\n", __FILE__, check_failures);      \
            return EXIT_FAILURE;                                                        \
        }                                                                               \
        printf("%s: ok\n", __FILE__);                                                   \
        return EXIT_SUCCESS;                                                            \
    } while (0)

#endif
