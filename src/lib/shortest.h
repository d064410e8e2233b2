/* The shortest decimal digits of a double that read back as the same
 * double (the digits of Python's float repr), for the canonical writer. */
#ifndef HD_SHORTEST_H
#define HD_SHORTEST_H

#ifdef __cplusplus
extern "C" {
#endif

/* A double has at most 17 significant decimal digits. */
#define SHORTEST_DIGITS_MAX 17

/* x finite and > 0.  Writes the fewest digits d1 d2 ... dn (no leading or
 * trailing zeros, NUL-terminated) whose value 0.d1d2...dn * 10^point is
 * read back as x by a correctly rounding reader, the one nearest to x
 * where several are; returns n (1..17) and the exponent in *ret_point. */
int shortest_digits(double x, char digits[SHORTEST_DIGITS_MAX + 1], int *ret_point);

#ifdef __cplusplus
}
#endif

#endif
