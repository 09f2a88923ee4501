-- CodingBridge for Neovim: is the agent working, done, or waiting for me?
-- setup() reaches the daemon (transport.lua), keeps the sessions current
-- (state.lua), announces what needs the person (notify.lua); :CodingBridge
-- is commands.lua.
local rpc = require('codingbridge.rpc')
local state = require('codingbridge.state')
local notify = require('codingbridge.notify')
local transport = require('codingbridge.transport')

local M = {}

M.config = { cmd = 'codingbridge', state_dir = nil, tick_ms = 1000 }
-- mode: 'socket' | 'stdio' | nil; ready once initialize answered.
M.info = { mode = nil, socket = nil, ready = false, server = nil, error = nil, stderr = '' }
M.conn = nil

local tick_timer = nil
local stopping = false

local function redraw()
  pcall(vim.cmd, 'redrawstatus!')
end

local function apply(summary)
  local old = state.apply(summary)
  notify.changed(M.conn, old, summary)
end

-- The whole picture: on connecting (session.changed then keeps it current).
local function refresh()
  if not (M.conn and M.info.ready) then return end
  M.conn:request('session.list', nil, function(err, r)
    if err then return end
    local ids = {}
    for _, s in ipairs(r.sessions) do
      ids[s.id] = true
      apply(s)
    end
    state.forget_missing(ids)
    redraw()
  end)
end
M.refresh = refresh

local function ensure_ticking()
  if tick_timer then return end
  tick_timer = (vim.uv or vim.loop).new_timer()
  -- Only the elapsed time moves by itself: redraw, ask nothing.
  tick_timer:start(M.config.tick_ms, M.config.tick_ms, vim.schedule_wrap(function()
    if state.any('processing') then redraw() end
  end))
end

local function on_notification(method, params)
  if method == 'session.changed' and params and params.session ~= vim.NIL then
    apply(params.session)
    redraw()
  end
end

local function attach(reader, writer, mode)
  M.info.mode = mode
  M.conn = rpc.new(reader, writer, {
    on_notification = on_notification,
    on_close = function(reason)
      local was_ready = M.info.ready
      M.info.ready = false
      M.info.error = M.info.error or tostring(reason)
      -- The daemon went away (restarted, killed): carry on with the next one
      -- on the socket, or a server of our own.
      if was_ready and not stopping then vim.defer_fn(M.start, 1000) end
    end,
  })
  M.conn:request('initialize', {
    clientInfo = { name = 'codingbridge.nvim', version = '1' },
    capabilities = vim.empty_dict(),
    deviceId = 'neovim',
  }, function(err, result)
    if err then
      M.info.error = 'initialize failed: ' .. (err.message or vim.inspect(err))
      return
    end
    M.info.server, M.info.ready, M.info.error = result.serverInfo, true, nil
    M.conn:notify('initialized', vim.empty_dict())
    refresh()
  end)
end

local function spawn()
  local started = false
  transport.spawn(M.config, function(stdout, stdin, err)
    if not stdout then
      M.info.error = ('cannot start %s: %s'):format(M.config.cmd, err)
      return
    end
    started = true
    attach(stdout, stdin, 'stdio')
  end, function(code, stderr)
    M.info.stderr = stderr
    M.info.ready = false
    -- 2: another server took the socket between our connect and our start.
    if code == 2 and started and M.info.server == nil then
      return M.start_connect(false)
    end
    M.info.error = ('%s serve exited with code %d'):format(M.config.cmd, code)
  end)
end

-- try_spawn: start a server when nobody serves the socket.
function M.start_connect(try_spawn)
  M.info.socket = transport.socket_path(M.config.state_dir)
  transport.connect(M.info.socket, vim.schedule_wrap(function(pipe, err)
    if pipe then return attach(pipe, pipe, 'socket') end
    if try_spawn then return spawn() end
    M.info.error = ('cannot connect to %s: %s'):format(M.info.socket, err)
  end))
end

function M.start()
  if M.conn and not M.conn.closed then return end
  stopping = false
  M.info.error, M.info.server = nil, nil
  state.reset()
  ensure_ticking()
  M.start_connect(true)
end

-- A server we started ends with us (shutdown, then exit); a daemon we only
-- connected to keeps serving the others.
function M.stop()
  if not (M.conn and not M.conn.closed) then return end
  stopping = true
  if M.info.mode == 'stdio' and M.info.ready then
    M.conn:request_sync('shutdown', nil, 2000)
    M.conn:notify('exit', nil)
    -- The server closing its stdout says it took the exit; Neovim may be
    -- about to quit, which would drop a write still queued.
    vim.wait(1000, function() return M.conn.closed end, 10)
  end
  M.conn:close('stopped')
end

function M.setup(opts)
  M.config = vim.tbl_extend('force', M.config, opts or {})
  M.started = true
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = vim.api.nvim_create_augroup('codingbridge', { clear = true }),
    callback = M.stop,
  })
  M.start()
end

function M.statusline()
  return state.statusline()
end

-- Starts with the defaults when setup() was never called (:CodingBridge first).
function M.ensure_started()
  if not M.started then M.setup() end
end

return M
