/*
 * cmdbus.h — the CommandBus plugin ABI, version 1.
 *
 * A plugin is a shared library that exports one function, named after the ABI
 * major version it speaks:
 *
 *     const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void);
 *
 * It returns a pointer to a descriptor: static data inside the plugin that names
 * the plugin and its commands and holds its functions. The host checks the
 * descriptor's magic number and version fields (literals compiled into the
 * plugin) before it calls any other plugin code, and refuses a mismatch.
 *
 * Commands, results and events cross this boundary as a name plus JSON bytes.
 * No Swift type crosses it, so a plugin may be written in Swift (with the
 * CommandBusPlugin SDK), in C, or in any language that exports C symbols.
 *
 * MEMORY OWNERSHIP. One rule, both ways: whoever allocates, frees.
 *  - Memory the host passes to the plugin (payloads, names, the cmdbus_call
 *    handle) belongs to the host. It stays valid only for the duration of the
 *    call it was passed to, except a handle() call's payload and call handle,
 *    which stay valid until the plugin calls host->complete() for that call.
 *    Copy anything you need to keep.
 *  - Memory the plugin passes to the host (results, error messages, events,
 *    log lines, subcommand payloads) belongs to the plugin. The host copies it
 *    before the host function returns; the plugin may free or reuse it then.
 *  - Bytes the host passes to an on_reply callback are valid only during it.
 *  - The descriptor, its strings and its command table must stay valid for the
 *    life of the process: the host never unloads a plugin (no dlclose).
 *  - The cmdbus_host_api table the host passes to init() stays valid for the
 *    life of the process.
 *
 * THREADS. The host may call can_handle(), handle() and cancel() from any
 * thread, concurrently. Host functions may be called from any thread.
 */
#ifndef CMDBUS_H
#define CMDBUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The ABI major version; it is also in the entry point's name. */
#define CMDBUS_ABI_VERSION_MAJOR 1
/**
 * The ABI minor version: additions that older hosts can ignore. 1.1 added command_flags
 * and invert; 1.2 added host->envelope; 1.3 added host->progress and plugin_flags; 1.4 added
 * CMDBUS_PLUGIN_HANDLE_DECIDES and CMDBUS_DECLINED.
 */
#define CMDBUS_ABI_VERSION_MINOR 4
/** The first field of every descriptor: "CMDB". */
#define CMDBUS_PLUGIN_MAGIC 0x434D4442u

/** Status codes, for host->complete(), on_reply and can_handle's errors. */
typedef enum cmdbus_status {
    /** Success; the body is the JSON result. */
    CMDBUS_OK = 0,
    /** The handler failed; the body is a UTF-8 message. */
    CMDBUS_FAILED = 1,
    /** The payload is not JSON or does not fit the command; the body says which field. */
    CMDBUS_DECODING_FAILED = 2,
    /** The command was cancelled. */
    CMDBUS_CANCELLED = 3,
    /** No handler would take the (sub)command. */
    CMDBUS_NO_HANDLER = 4,
    /** The (sub)command ran past its deadline. */
    CMDBUS_TIMED_OUT = 5,
    /** The handler failed, but trying again may succeed; the body is a UTF-8 message. */
    CMDBUS_FAILED_RETRYABLE = 6,
    /**
     * (ABI 1.4) handle() would not take this command after all: its can_handle says no. Only
     * from a plugin that sets CMDBUS_PLUGIN_HANDLE_DECIDES, before it has done anything; the
     * host passes the command to the next handler in the chain.
     */
    CMDBUS_DECLINED = 7
} cmdbus_status;

/** Log levels for host->log(). */
typedef enum cmdbus_log_level {
    CMDBUS_LOG_DEBUG = 0,
    CMDBUS_LOG_INFO = 1,
    CMDBUS_LOG_WARNING = 2,
    CMDBUS_LOG_ERROR = 3
} cmdbus_log_level;

/** A borrowed run of bytes (JSON or UTF-8 text); not NUL-terminated. */
typedef struct cmdbus_bytes {
    const uint8_t *data;
    size_t length;
} cmdbus_bytes;

/** One request from the host to the plugin: opaque, owned by the host. */
typedef struct cmdbus_call cmdbus_call;

/** Receives the outcome of a subcommand sent with host->send(). Called exactly once, on any thread. */
typedef void (*cmdbus_reply_fn)(void *user_data, int32_t status, cmdbus_bytes body);

/** The functions the host offers a plugin. Passed to init(); valid for the life of the process. */
typedef struct cmdbus_host_api {
    /** sizeof(cmdbus_host_api) as the host compiled it; fields past it are absent. */
    uint32_t struct_size;
    /** The host's ABI versions. */
    uint32_t abi_major;
    uint32_t abi_minor;

    /**
     * Finishes a handle() call: status is a cmdbus_status; body is the JSON result
     * on CMDBUS_OK, else a UTF-8 error message (it may be empty). Call it exactly
     * once per handle(), from any thread, before or after handle() returns. During
     * can_handle() it may be called once to explain an error. The call handle is
     * invalid once it returns.
     */
    void (*complete)(cmdbus_call *call, int32_t status, cmdbus_bytes body);

    /**
     * Sends a subcommand on the bus, as a child of the command behind `parent`,
     * to whichever handler (in any plugin, or the host) takes it. on_reply gets
     * the result (CMDBUS_OK and JSON) or a status and a UTF-8 message, exactly
     * once, possibly before send() returns. `command` is NUL-terminated.
     */
    void (*send)(cmdbus_call *parent, const char *command, cmdbus_bytes payload,
                 cmdbus_reply_fn on_reply, void *user_data);

    /** Emits an event about the command behind `call`: a NUL-terminated name and JSON bytes. */
    void (*emit)(cmdbus_call *call, const char *name, cmdbus_bytes payload);

    /** Writes a log line; `call` may be NULL for lines about no command. `message` is NUL-terminated. */
    void (*log)(cmdbus_call *call, int32_t level, const char *message);

    /** Whether the command behind `call` has been cancelled or timed out: 1 or 0. */
    int32_t (*is_cancelled)(cmdbus_call *call);

    /* ---- ABI 1.2: present when struct_size covers it. ---- */

    /**
     * The envelope of the command behind `call`, as JSON, passed to on_reply before this
     * returns: {"id", "command", "correlationId", "parentId"?, "createdAt", "metadata"?}.
     * The id is the idempotency key: delivery is at least once, so a handler with side
     * effects can check whether it already did the work for this id.
     */
    void (*envelope)(cmdbus_call *call, cmdbus_reply_fn on_reply, void *user_data);

    /* ---- ABI 1.3: present when struct_size covers it. ---- */

    /**
     * Reports how far the command behind `call` has got: `done` of `total` units (total > 0,
     * 0 <= done <= total). Once a handler reports progress, it is the command's progress;
     * otherwise the host reports how many of the subcommands sent so far have finished.
     */
    void (*progress)(cmdbus_call *call, int64_t done, int64_t total);
} cmdbus_host_api;

/** Flags for cmdbus_plugin_descriptor.command_flags (ABI 1.1). */
/** A query: the host does not write it to its journal. */
#define CMDBUS_COMMAND_NOT_JOURNALED 0x1u
/** Its state lives only in the journal: the host replays its succeeded entries into the plugin at start. */
#define CMDBUS_COMMAND_REPLAY_ON_START 0x2u
/** invert() can name the command that undoes it. */
#define CMDBUS_COMMAND_REVERSIBLE 0x4u

/** One command a plugin handles. */
typedef struct cmdbus_command_descriptor {
    /** The routing name, NUL-terminated, such as "greet". */
    const char *name;
    /** How many of these may run at once; 0 means no limit, 1 one at a time. */
    int32_t max_concurrency;
} cmdbus_command_descriptor;

/** What a plugin is and does. Static data inside the plugin. */
typedef struct cmdbus_plugin_descriptor {
    /** CMDBUS_PLUGIN_MAGIC. */
    uint32_t magic;
    /** CMDBUS_ABI_VERSION_MAJOR and _MINOR as the plugin was compiled. */
    uint32_t abi_major;
    uint32_t abi_minor;
    /** sizeof(cmdbus_plugin_descriptor) as the plugin compiled it. */
    uint32_t struct_size;

    /** The plugin's name and version, NUL-terminated; required. */
    const char *name;
    const char *version;
    /** The CommandBusPlugin SDK version, or NULL for plugins written without it. */
    const char *sdk_version;
    /** The Swift compiler version it was built with ("6.3"), or NULL for C. */
    const char *swift_version;

    /** Higher priorities are asked first when two plugins handle one command. */
    int32_t priority;

    /** The commands it handles: command_count entries. */
    uint32_t command_count;
    const cmdbus_command_descriptor *commands;

    /**
     * Called once, after the host has checked the descriptor and before any other
     * function. Store `host`; set *plugin_state to anything (it is passed back).
     * Return 0 on success; anything else refuses the plugin. May be NULL.
     */
    int32_t (*init)(const cmdbus_host_api *host, void **plugin_state);

    /**
     * Whether the plugin would take this command now, cheaply and without doing
     * the work: 1 yes, 0 no, or a negative cmdbus_status (-CMDBUS_DECODING_FAILED)
     * for a malformed payload, optionally explained with host->complete(call, …).
     * May be NULL: every payload is taken.
     */
    int32_t (*can_handle)(void *plugin_state, uint32_t command_index, cmdbus_bytes payload, cmdbus_call *call);

    /**
     * Does the work for commands[command_index]. Must end with exactly one
     * host->complete(call, …), from any thread, now or later.
     */
    void (*handle)(void *plugin_state, uint32_t command_index, cmdbus_bytes payload, cmdbus_call *call);

    /**
     * Asks the plugin to stop a handle() call early. The plugin must still
     * complete it (CMDBUS_CANCELLED is usual). May be NULL; plugins can also
     * poll host->is_cancelled().
     */
    void (*cancel)(void *plugin_state, cmdbus_call *call);

    /* ---- ABI 1.1: hosts read these only when abi_minor >= 1 and struct_size covers them. ---- */

    /** CMDBUS_COMMAND_* flags, command_count entries, parallel to commands; NULL means none set. */
    const uint32_t *command_flags;

    /**
     * Names the command that undoes commands[command_index] with this payload: call
     * host->complete(call, CMDBUS_OK, {"command": NAME, "payload": {...}}) and return 0.
     * Return 1 if it has no inverse, or a negative cmdbus_status (with an optional
     * host->complete message) for a malformed payload. The call handle is valid only
     * during invert(). May be NULL: no command has an inverse.
     */
    int32_t (*invert)(void *plugin_state, uint32_t command_index, cmdbus_bytes payload, cmdbus_call *call);

    /* ---- ABI 1.3: hosts read it only when abi_minor >= 3 and struct_size covers it. ---- */

    /** CMDBUS_PLUGIN_* flags about the plugin as a whole. */
    uint32_t plugin_flags;
} cmdbus_plugin_descriptor;

/** Flags for cmdbus_plugin_descriptor.plugin_flags (ABI 1.3). */
/** Built without optimization (a debug build): it works, but may run ten times slower. */
#define CMDBUS_PLUGIN_DEBUG_BUILD 0x1u
/**
 * (ABI 1.4) handle() asks can_handle itself and completes with CMDBUS_DECLINED when it says
 * no, so the host need not call can_handle before handle: routing takes the command as wanted
 * and passes it on if handle declines. One crossing per command instead of two. can_handle is
 * still called when someone only asks (`cmdbus can`).
 */
#define CMDBUS_PLUGIN_HANDLE_DECIDES 0x2u

/** The type of the entry point, `cmdbus_plugin_v1`. */
typedef const cmdbus_plugin_descriptor *(*cmdbus_plugin_entry_v1)(void);

/** The entry point's name for this ABI major version. */
#define CMDBUS_PLUGIN_ENTRY_NAME "cmdbus_plugin_v1"

#ifdef __cplusplus
}
#endif

#endif /* CMDBUS_H */
