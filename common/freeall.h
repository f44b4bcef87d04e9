/* freeall.h -- freeing the parts a struct owns, in one call.
 *
 * A snapshot, an analysis and a dump's model each own several malloc'd
 * arrays; VT_FREE_ALL(p, q, ...) frees every pointer it is given (NULL
 * ones included, as free does), so that a destructor names what its
 * struct owns once, as a list. */
#ifndef VT_COMMON_FREEALL_H
#define VT_COMMON_FREEALL_H

#include <stddef.h>
#include <stdlib.h>

#define VT_FREE_ALL(...)                                                       \
    do {                                                                       \
        void *vt_parts_[] = {__VA_ARGS__};                                     \
        for (size_t vt_i_ = 0; vt_i_ < sizeof vt_parts_ / sizeof *vt_parts_; vt_i_++) \
            free(vt_parts_[vt_i_]);                                            \
    } while (0)

#endif
