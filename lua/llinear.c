/*
** llinear.c -- Lua bindings of the Linear layer (lib/linear.c).
** Placeholder: registers nothing until the Linear layer lands; its owner
** replaces this file.  Helpers to use are in lnvfp4.h.
*/
#include "lnvfp4.h"


void nvfp4L_open_linear (lua_State *L, int modidx) {
  (void)L;
  (void)modidx;
}
