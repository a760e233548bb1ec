#define PD_VERSION "0.1.0"
/* The commit and build time: -D by the Makefile for main.o and cmd_serve.o
 * (make GIT_COMMIT=... SOURCE_DATE_EPOCH=... where there is no .git). */
#ifndef PD_COMMIT
#define PD_COMMIT ""
#endif
#ifndef PD_BUILD_TIME
#define PD_BUILD_TIME ""
#endif
