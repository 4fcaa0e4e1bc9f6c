/*
 * list.h — the engine's one intrusive list: a doubly linked list with head and tail,
 * NULL-terminated. An element embeds a coc__link (one per list it can be on) and is
 * found from it with COC__ENTRY. Every queue and set of the engine uses it: live
 * requests, posted receives, unexpected messages, a connection's send queue, forwarding's
 * paused and resumed connections, the shared-memory connections, failover's kept frames.
 * Only the operations those users need: append, prepend, remove, pop the first, walk.
 * Removal is O(1), so an element leaves a list without a walk; a removed link is zeroed.
 */
#ifndef COC_LIST_H
#define COC_LIST_H

#include <stddef.h>

typedef struct coc__link {
    struct coc__link *prev, *next;
} coc__link;

typedef struct coc__list {
    coc__link *head, *tail;
} coc__list;

/* The element of type `type` whose member `member` is link `l` (NULL for NULL); `l` is
 * evaluated twice: pass a variable. */
#define COC__ENTRY(l, type, member) \
    ((l) ? (type *)(void *)((char *)(l) - offsetof(type, member)) : (type *)NULL)
/* The first element of list `list`, and the one after element `x`, or NULL. */
#define COC__FIRST(list, type, member) COC__ENTRY((list)->head, type, member)
#define COC__NEXT(x, type, member) COC__ENTRY((x)->member.next, type, member)
/* for (each element x of list): x must stay on the list through the body */
#define COC__EACH(x, list, type, member) \
    for (type *x = COC__FIRST(list, type, member); x; x = COC__NEXT(x, type, member))

static inline int coc__list_empty(const coc__list *list)
{
    return list->head == NULL;
}

/* Whether link n is on `list`, for an element that can be on no other list through n. */
static inline int coc__list_has(const coc__list *list, const coc__link *n)
{
    return n->prev != NULL || list->head == n;
}

static inline void coc__list_append(coc__list *list, coc__link *n)
{
    n->next = NULL;
    n->prev = list->tail;
    if (list->tail)
        list->tail->next = n;
    else
        list->head = n;
    list->tail = n;
}

static inline void coc__list_prepend(coc__list *list, coc__link *n)
{
    n->prev = NULL;
    n->next = list->head;
    if (list->head)
        list->head->prev = n;
    else
        list->tail = n;
    list->head = n;
}

static inline void coc__list_remove(coc__list *list, coc__link *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        list->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        list->tail = n->prev;
    n->prev = n->next = NULL;
}

/* Remove and return the first link, or NULL when the list is empty. */
static inline coc__link *coc__list_pop(coc__list *list)
{
    coc__link *n = list->head;
    if (n)
        coc__list_remove(list, n);
    return n;
}

#endif
