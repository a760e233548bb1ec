/*
 * pdzstd.h — libzstd.so.1, loaded the first time profd calls it (pddl.h):
 * only the stores' block codec needs it.
 * Include this instead of <zstd.h>.
 */
#ifndef PD_PDZSTD_H
#define PD_PDZSTD_H

#include "pddl.h"

#include <zstd.h>

#define PD_ZSTD_FNS(X) \
	X(ZSTD_CCtx_refPrefix) \
	X(ZSTD_CCtx_reset) \
	X(ZSTD_CCtx_setParameter) \
	X(ZSTD_DCtx_refPrefix) \
	X(ZSTD_DCtx_reset) \
	X(ZSTD_compress2) \
	X(ZSTD_compressBound) \
	X(ZSTD_compressCCtx) \
	X(ZSTD_createCCtx) \
	X(ZSTD_createDCtx) \
	X(ZSTD_decompressDCtx) \
	X(ZSTD_freeCCtx) \
	X(ZSTD_freeDCtx) \
	X(ZSTD_getErrorName) \
	X(ZSTD_getFrameContentSize) \
	X(ZSTD_isError)

PD_DL_DECLARE(zstd, PD_ZSTD_FNS)

#ifndef PD_ZSTD_NO_MACROS
#define ZSTD_CCtx_refPrefix (pd_zstd()->ZSTD_CCtx_refPrefix)
#define ZSTD_CCtx_reset (pd_zstd()->ZSTD_CCtx_reset)
#define ZSTD_CCtx_setParameter (pd_zstd()->ZSTD_CCtx_setParameter)
#define ZSTD_DCtx_refPrefix (pd_zstd()->ZSTD_DCtx_refPrefix)
#define ZSTD_DCtx_reset (pd_zstd()->ZSTD_DCtx_reset)
#define ZSTD_compress2 (pd_zstd()->ZSTD_compress2)
#define ZSTD_compressBound (pd_zstd()->ZSTD_compressBound)
#define ZSTD_compressCCtx (pd_zstd()->ZSTD_compressCCtx)
#define ZSTD_createCCtx (pd_zstd()->ZSTD_createCCtx)
#define ZSTD_createDCtx (pd_zstd()->ZSTD_createDCtx)
#define ZSTD_decompressDCtx (pd_zstd()->ZSTD_decompressDCtx)
#define ZSTD_freeCCtx (pd_zstd()->ZSTD_freeCCtx)
#define ZSTD_freeDCtx (pd_zstd()->ZSTD_freeDCtx)
#define ZSTD_getErrorName (pd_zstd()->ZSTD_getErrorName)
#define ZSTD_getFrameContentSize (pd_zstd()->ZSTD_getFrameContentSize)
#define ZSTD_isError (pd_zstd()->ZSTD_isError)
#endif

#endif
