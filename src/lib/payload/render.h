/* Private: the Markdown block of each payload type (render.c), for
 * resume_context; payload.c picks one by payload_type. */
#ifndef HD_RENDER_H
#define HD_RENDER_H

#include <jansson.h>

/* p is an object (vox, baton, uah) or a string (act); -EINVAL if not. */
int render_vox(const json_t *p, char **ret);
int render_baton(const json_t *p, char **ret);
int render_uah(const json_t *p, char **ret);
int render_act(const json_t *p, char **ret);

#endif
