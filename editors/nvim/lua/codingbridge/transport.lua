-- Reaching the daemon: its unix socket when one already serves it (a daemon
-- started in a terminal, or by another Neovim), else a server of our own
-- (`serve --listen unix`) on our stdio, so hooks in any terminal reach it.
local M = {}

local uv = vim.uv or vim.loop -- (vim.loop: before 0.10)

-- The socket `serve --listen unix` and `codingbridge hook` agree on.
function M.socket_path(state_dir)
  local dir = state_dir
  if not dir then
    local xdg = os.getenv('XDG_STATE_HOME')
    if xdg and xdg ~= '' then
      dir = xdg .. '/codingbridge'
    else
      dir = (os.getenv('HOME') or '') .. '/.local/state/codingbridge'
    end
  end
  return dir .. '/codingbridge.sock'
end

-- done(pipe) once connected, done(nil, err) when nobody listens there.
function M.connect(path, done)
  local pipe = uv.new_pipe(false)
  pipe:connect(path, function(err)
    if err then
      pipe:close()
      done(nil, err)
    else
      done(pipe)
    end
  end)
end

local function serve_args(opts)
  local args = { 'serve', '--listen', 'unix' }
  if opts.state_dir then vim.list_extend(args, { '--state-dir', opts.state_dir }) end
  return args
end

-- done(stdout, stdin) at once, or (nil, nil, err) if it cannot start.
-- on_exit(code, stderr_tail) when the server ends.
function M.spawn(opts, done, on_exit)
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local tail = ''
  local handle, pid
  handle, pid = uv.spawn(opts.cmd, { args = serve_args(opts), stdio = { stdin, stdout, stderr } },
    function(code)
      handle:close()
      if not stderr:is_closing() then stderr:close() end
      vim.schedule(function() on_exit(code, tail) end)
    end)
  if not handle then
    for _, p in ipairs({ stdin, stdout, stderr }) do p:close() end
    return done(nil, nil, pid) -- uv.spawn returns the error message in place of the pid
  end
  -- The server logs to stderr; keep the end of it for :checkhealth and errors.
  stderr:read_start(function(_, data)
    if data then tail = (tail .. data):sub(-2000) end
  end)
  done(stdout, stdin)
end

return M
