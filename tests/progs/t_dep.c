/* t_dep.c -- a dependency of the RTLD_LOCAL library. */
int dep_symbol(void) { return 7; }
