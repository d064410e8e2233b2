/* shortest_digits() over Google's double-conversion (the shortest mode that
 * V8 and Chromium print numbers with): the rest of the library stays C.
 * Built without exceptions or RTTI; it allocates nothing and reads no
 * locale, so nothing here can throw into C or depend on the environment. */
#include <double-conversion/double-to-string.h>

#include "shortest.h"

using double_conversion::DoubleToStringConverter;

int shortest_digits(double x, char digits[SHORTEST_DIGITS_MAX + 1], int *ret_point)
{
        bool negative;
        int len = 0, point = 0;

        DoubleToStringConverter::DoubleToAscii(x, DoubleToStringConverter::SHORTEST, 0,
                                               digits, SHORTEST_DIGITS_MAX + 1,
                                               &negative, &len, &point);
        *ret_point = point;
        return len;
}
